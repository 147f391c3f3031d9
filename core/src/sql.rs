//! The SQL recipe of fenced writes: an `UPDATE` that applies only while the
//! row's fence is not newer than the writer's, and records the writer's
//! fence in the same statement. The Python (`fencelock.sql`) and Node
//! (`fencelock/sql`) helpers run these statements on the user's own
//! database connection; the text, the parameter order and what a refusal
//! means are decided here once.
//!
//! `<=`, not `<`: the same holder writing twice (its fence equals the
//! recorded one) must succeed, while a holder whose fence is older than one
//! already recorded is refused. A row whose fence is `NULL` (never written
//! under a lock) accepts any fence.
//!
//! ```text
//! UPDATE t SET "c1" = ?, ..., "fence" = ? WHERE "w1" = ? AND ... AND ("fence" IS NULL OR "fence" <= ?)
//!     parameters: the set values, the fence, the where values, the fence
//! SELECT max("fence") FROM t WHERE "w1" = ? AND ...    (only after 0 rows were updated)
//!     parameters: the where values
//! ```
//!
//! Identifiers are always quoted (`"` doubled inside), values always bound
//! as parameters: nothing the caller passes becomes SQL text.

use crate::{Error, LockName};

/// How a database driver writes parameter `n` (from 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placeholders {
    /// `$1` (PostgreSQL's own; node-postgres, asyncpg).
    Dollar,
    /// `?` (DB-API `qmark`: sqlite3, ...).
    Question,
    /// `:1` (DB-API `numeric`).
    Numeric,
    /// `%s` (DB-API `format` / `pyformat`: psycopg, psycopg2, pg8000, ...);
    /// a `%` in an identifier is written `%%`.
    Format,
}

impl Placeholders {
    /// From a DB-API `paramstyle` (`qmark`, `numeric`, `format`,
    /// `pyformat`) or `dollar`. `named` (parameters by name) is refused.
    pub fn from_paramstyle(style: &str) -> Result<Placeholders, Error> {
        match style {
            "dollar" => Ok(Placeholders::Dollar),
            "qmark" => Ok(Placeholders::Question),
            "numeric" => Ok(Placeholders::Numeric),
            "format" | "pyformat" => Ok(Placeholders::Format),
            other => Err(Error::invalid(format!(
                "paramstyle {other:?} is not supported by fenced updates \
                 (use one of dollar, qmark, numeric, format, pyformat)"
            ))),
        }
    }

    fn write(self, sql: &mut String, n: usize) {
        match self {
            Placeholders::Dollar => sql.push_str(&format!("${n}")),
            Placeholders::Question => sql.push('?'),
            Placeholders::Numeric => sql.push_str(&format!(":{n}")),
            Placeholders::Format => sql.push_str("%s"),
        }
    }
}

/// The statements of one fenced update (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FencedUpdate {
    update: String,
    check: String,
    /// The table as written by the caller, for `StaleFence` messages.
    table: String,
}

impl FencedUpdate {
    /// `table`: one name, or its qualified parts (`["billing", "accounts"]`);
    /// `set`: the columns to write (may be empty: then only the fence is
    /// recorded); `filter`: the columns of the `WHERE ... = ?` that picks the
    /// row (at least one); `fence_column`: where the last accepted fence lives.
    pub fn new<S: AsRef<str>>(
        table: &[S],
        set: &[S],
        filter: &[S],
        fence_column: &str,
        style: Placeholders,
    ) -> Result<FencedUpdate, Error> {
        let strs = |v: &[S]| -> Vec<String> { v.iter().map(|s| s.as_ref().to_owned()).collect() };
        let (table, set, filter) = (strs(table), strs(set), strs(filter));
        if table.is_empty() {
            return Err(Error::invalid("a fenced update needs a table name"));
        }
        if filter.is_empty() {
            return Err(Error::invalid(
                "a fenced update needs at least one where column (it would update every row)",
            ));
        }
        if set.iter().any(|column| column == fence_column) {
            return Err(Error::invalid(format!(
                "column {fence_column:?} is the fence column: the fenced update writes it"
            )));
        }
        let quoted = |name: &str| -> Result<String, Error> {
            if name.is_empty() || name.contains('\0') {
                return Err(Error::invalid(
                    "SQL identifiers must be non-empty and free of NUL characters",
                ));
            }
            let mut q = format!("\"{}\"", name.replace('"', "\"\""));
            if style == Placeholders::Format {
                q = q.replace('%', "%%");
            }
            Ok(q)
        };
        let table_sql = table
            .iter()
            .map(|part| quoted(part))
            .collect::<Result<Vec<_>, _>>()?
            .join(".");
        let fence = quoted(fence_column)?;
        let mut n = 0;
        let mut next = |sql: &mut String| {
            n += 1;
            style.write(sql, n);
        };

        let mut update = format!("UPDATE {table_sql} SET ");
        for column in &set {
            update.push_str(&quoted(column)?);
            update.push_str(" = ");
            next(&mut update);
            update.push_str(", ");
        }
        update.push_str(&fence);
        update.push_str(" = ");
        next(&mut update);
        let mut filter_sql = String::new();
        let mut conditions = Vec::new();
        for column in &filter {
            let mut condition = format!("{} = ", quoted(column)?);
            next(&mut condition);
            conditions.push(condition);
        }
        filter_sql.push_str(&conditions.join(" AND "));
        update.push_str(" WHERE ");
        update.push_str(&filter_sql);
        update.push_str(&format!(" AND ({fence} IS NULL OR {fence} <= "));
        next(&mut update);
        update.push(')');

        // The check binds only the where values: numbered from 1 again.
        let mut check = format!("SELECT max({fence}) FROM {table_sql} WHERE ");
        let mut conditions = Vec::new();
        for (i, column) in filter.iter().enumerate() {
            let mut condition = format!("{} = ", quoted(column)?);
            style.write(&mut condition, i + 1);
            conditions.push(condition);
        }
        check.push_str(&conditions.join(" AND "));
        Ok(FencedUpdate {
            update,
            check,
            table: table.join("."),
        })
    }

    /// The `UPDATE`; parameters: the set values, the fence, the where
    /// values, the fence.
    pub fn update(&self) -> &str {
        &self.update
    }

    /// The `SELECT max(fence)` to run when the update changed no row;
    /// parameters: the where values.
    pub fn check(&self) -> &str {
        &self.check
    }

    /// What the update did: `updated` rows changed (then the check is not
    /// needed), else the check's answer `newest` decides: a newer fence than
    /// the writer's is a [`Error::StaleFence`] (named after the lease's lock,
    /// if the fence came from one); no row (or none with a newer fence) is
    /// `Ok(0)`.
    pub fn outcome(
        &self,
        name: Option<&LockName>,
        fence: u64,
        updated: u64,
        newest: Option<i128>,
    ) -> Result<u64, Error> {
        match newest {
            _ if updated > 0 => Ok(updated),
            Some(accepted) if accepted > i128::from(fence) => Err(Error::StaleFence {
                name: name.cloned(),
                resource: self.table.clone().into_bytes(),
                fence,
                accepted: u64::try_from(accepted).unwrap_or(u64::MAX),
            }),
            _ => Ok(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_per_placeholder_style() {
        let u = FencedUpdate::new(
            &["accounts"],
            &["balance", "note"],
            &["id"],
            "fence",
            Placeholders::Dollar,
        )
        .unwrap();
        assert_eq!(
            u.update(),
            r#"UPDATE "accounts" SET "balance" = $1, "note" = $2, "fence" = $3 WHERE "id" = $4 AND ("fence" IS NULL OR "fence" <= $5)"#
        );
        assert_eq!(
            u.check(),
            r#"SELECT max("fence") FROM "accounts" WHERE "id" = $1"#
        );
        let q =
            FencedUpdate::new(&["s", "t"], &[], &["a", "b"], "f", Placeholders::Question).unwrap();
        assert_eq!(
            q.update(),
            r#"UPDATE "s"."t" SET "f" = ? WHERE "a" = ? AND "b" = ? AND ("f" IS NULL OR "f" <= ?)"#
        );
        assert_eq!(
            q.check(),
            r#"SELECT max("f") FROM "s"."t" WHERE "a" = ? AND "b" = ?"#
        );
        let n = FencedUpdate::new(&["t"], &["v"], &["k"], "f", Placeholders::Numeric).unwrap();
        assert!(n
            .update()
            .ends_with(r#""k" = :3 AND ("f" IS NULL OR "f" <= :4)"#));
    }

    #[test]
    fn identifiers_are_quoted_never_interpolated() {
        let u = FencedUpdate::new(
            &["we\"ird%"],
            &["x\"; DROP TABLE t; --"],
            &["id"],
            "fence",
            Placeholders::Format,
        )
        .unwrap();
        assert_eq!(
            u.update(),
            r#"UPDATE "we""ird%%" SET "x""; DROP TABLE t; --" = %s, "fence" = %s WHERE "id" = %s AND ("fence" IS NULL OR "fence" <= %s)"#
        );
    }

    #[test]
    fn bad_shapes_are_refused() {
        let bad = |t: &[&str], s: &[&str], w: &[&str], f: &str| {
            matches!(
                FencedUpdate::new(t, s, w, f, Placeholders::Dollar),
                Err(Error::InvalidArgument(_))
            )
        };
        assert!(bad(&[], &["a"], &["id"], "fence"));
        assert!(bad(&["t"], &["a"], &[], "fence"));
        assert!(bad(&["t"], &["fence"], &["id"], "fence"));
        assert!(bad(&[""], &["a"], &["id"], "fence"));
        assert!(bad(&["t"], &["a\0"], &["id"], "fence"));
        assert!(bad(&["t"], &["a"], &["id"], ""));
        assert!(Placeholders::from_paramstyle("named").is_err());
        assert_eq!(
            Placeholders::from_paramstyle("pyformat"),
            Ok(Placeholders::Format)
        );
    }

    #[test]
    fn outcomes() {
        let u =
            FencedUpdate::new(&["acc"], &["v"], &["id"], "fence", Placeholders::Dollar).unwrap();
        let name = LockName::new("job").unwrap();
        assert_eq!(u.outcome(Some(&name), 5, 1, None), Ok(1));
        assert_eq!(u.outcome(Some(&name), 5, 0, None), Ok(0));
        assert_eq!(u.outcome(Some(&name), 5, 0, Some(5)), Ok(0));
        assert_eq!(
            u.outcome(Some(&name), 5, 0, Some(7)),
            Err(Error::StaleFence {
                name: Some(name),
                resource: b"acc".to_vec(),
                fence: 5,
                accepted: 7
            })
        );
    }
}
