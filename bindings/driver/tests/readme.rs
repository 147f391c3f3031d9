//! The README's Rust quick start is the crate's doctest: keep them identical.

fn code_block(text: &str, fence: &str) -> String {
    let mut lines = text.lines().map(str::trim_end);
    lines
        .by_ref()
        .find(|l| *l == fence)
        .expect("quick start block");
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
    assert_eq!(
        code_block(section, "```rust,no_run"),
        code_block(&docs, "```no_run")
    );
}
