//! The table `make safety` prints and the docs/safety.md it writes.

use crate::checker::Verdict;
use crate::run::{Config, Row};

fn cell(n: usize, guaranteed: bool) -> String {
    if guaranteed {
        n.to_string()
    } else {
        format!("{n} (not promised)")
    }
}

/// A verdict's findings by property, labelled as the docs name them.
fn findings(v: &Verdict) -> [(&'static str, &Vec<String>); 7] {
    [
        ("(a)", &v.a),
        ("(b)", &v.b),
        ("(c)", &v.c),
        ("(d)", &v.d),
        ("(e)", &v.e),
        ("(f)", &v.f),
        ("token leak", &v.secrets),
    ]
}

fn verdict(row: &Row) -> &'static str {
    match (row.pass, row.spec.control) {
        (true, false) => "PASS",
        (true, true) => "PASS (violations found, as required)",
        (false, true) => "FAIL (control found nothing)",
        (false, false) => "FAIL",
    }
}

pub fn line(row: &Row) -> String {
    let v = &row.verdict;
    format!(
        "{:<18} {:>6} CS {:>4} faults  a={} b={} c={} d={} e={} f={} lost={} leaks={}  {:.1}s  {}{}",
        row.spec.name,
        v.critical_sections,
        row.faults,
        v.a.len(),
        v.b.len(),
        v.c.len(),
        v.d.len(),
        v.e.len(),
        v.f.len(),
        v.lost,
        v.secrets.len(),
        row.seconds,
        verdict(row),
        row.error
            .as_ref()
            .map(|e| format!("  ERROR: {e}"))
            .unwrap_or_default()
    )
}

pub fn table(rows: &[Row]) -> String {
    let mut t = String::from(
        "| scenario | workers | critical sections | faults injected | writes accepted / rejected | (a) stale write accepted | (b) overlapping valid leases | (c) lease not ended | (d) held after run | (e) fence order | (f) unsuperseded lease refused | ended: released / lost / expired | result |\n\
         | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n",
    );
    for r in rows {
        let v = &r.verdict;
        t.push_str(&format!(
            "| {} | {} | {} | {} | {} / {} | {} | {} | {} | {} | {} | {} | {} / {} / {} | {}{} |\n",
            r.spec.name,
            r.langs,
            v.critical_sections,
            if r.unreplicated_locks > 0 {
                format!(
                    "{} ({} unreplicated locks lost)",
                    r.faults, r.unreplicated_locks
                )
            } else {
                r.faults.to_string()
            },
            v.writes_accepted,
            v.writes_rejected,
            if r.spec.control {
                format!("{} (control: expected)", v.a.len())
            } else {
                v.a.len().to_string()
            },
            cell(v.b.len(), r.spec.b_guaranteed),
            v.c.len(),
            v.d.len(),
            cell(v.e.len(), r.spec.e_guaranteed),
            cell(v.f.len(), r.spec.e_guaranteed),
            v.released,
            if r.spec.renewals_survive {
                format!("{} (0 promised)", v.lost)
            } else {
                v.lost.to_string()
            },
            v.expired,
            verdict(r),
            r.error
                .as_ref()
                .map(|e| format!(": {e}"))
                .unwrap_or_default()
        ));
    }
    let total: usize = rows.iter().map(|r| r.verdict.critical_sections).sum();
    let faults: usize = rows.iter().map(|r| r.faults).sum();
    t.push_str(&format!(
        "| **all** | | **{total}** | **{faults}** | | | | | | | | | |\n"
    ));
    t
}

pub fn print_details(row: &Row) {
    for (what, list) in findings(&row.verdict) {
        if list.is_empty() {
            continue;
        }
        println!("{} {what}: {} finding(s), e.g.:", row.spec.name, list.len());
        for m in list.iter().take(3) {
            println!("    {m}");
        }
    }
}

pub fn document(rows: &[Row], cfg: &Config, quick: bool, fuzz: Option<&str>) -> String {
    let mut d = String::new();
    d.push_str(include_str!("../safety-head.md"));
    d.push_str(&format!(
        "\n## Last run\n\n`make safety`{}: {} s per scenario (half for the renew-*, \
         redlock-baseline and control runs), {} workers per scenario ({}), seed {}; the \
         scenarios took {:.1} min in all.\n\n",
        if quick { " (quick subset)" } else { "" },
        cfg.seconds,
        cfg.workers,
        cfg.langs.join(", "),
        cfg.seed,
        rows.iter().map(|r| r.seconds).sum::<f64>() / 60.0
    ));
    d.push_str(&table(rows));
    d.push('\n');
    for r in rows {
        let lists = findings(&r.verdict);
        if lists.iter().all(|(_, l)| l.is_empty()) {
            continue;
        }
        d.push_str(&format!("- **{}** examples:", r.spec.name));
        for (what, l) in lists {
            if let Some(first) = l.first() {
                d.push_str(&format!(" {what} {first};"));
            }
        }
        d.push('\n');
    }
    d.push_str("\n### Scenarios\n\n| scenario | fault | (b) promised | (e), (f) promised | no lease lost promised |\n| --- | --- | --- | --- | --- |\n");
    let yes = |b: bool| if b { "yes" } else { "no" };
    for r in rows {
        d.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            r.spec.name,
            r.spec.what,
            yes(r.spec.b_guaranteed),
            yes(r.spec.e_guaranteed),
            yes(r.spec.renewals_survive)
        ));
    }
    if let Some(f) = fuzz {
        d.push_str(&format!("\n### Fuzzing (this run)\n\n{f}\n"));
    }
    d
}
