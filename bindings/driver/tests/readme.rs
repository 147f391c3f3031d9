//! The README's Rust examples are the crate's doctests: keep them identical.

/// The `nth` (from 0) code block opened by `fence` in `text`.
fn code_block(text: &str, fence: &str, nth: usize) -> String {
    let mut lines = text.lines().map(str::trim_end);
    for _ in 0..=nth {
        lines
            .by_ref()
            .find(|l| *l == fence)
            .expect("a README example block");
    }
    lines
        .take_while(|l| *l != "```")
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn readme_quick_start_matches_the_doctest() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let section = &readme[readme.find("## Rust").expect("README has a Rust section")..];
    let lib = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/src/lib.rs")).unwrap();
    let docs: String = lib
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| l.strip_prefix(' ').unwrap_or(l))
        .collect::<Vec<_>>()
        .join("\n");
    // The quick start, the renewal controls, the fenced writes, the
    // semaphore and read-write lock.
    for nth in 0..4 {
        assert_eq!(
            code_block(section, "```rust,no_run", nth),
            code_block(&docs, "```no_run", nth)
        );
    }
    // Several locks at once (after the operations block in the docs).
    assert_eq!(
        code_block(section, "```rust,no_run", 4),
        code_block(&docs, "```no_run", 5)
    );
    // "Operations: CLI and metrics": listing, watching, metrics.
    let operations = &readme[readme
        .find("## Operations: CLI and metrics")
        .expect("README has an Operations section")..];
    assert_eq!(
        code_block(operations, "```rust,no_run", 0),
        code_block(&docs, "```no_run", 4)
    );
}
