//! The numbers the docs state that the code owns: the frame format version,
//! the oldest version read and the store format, as `docs/FORMAT.md` and
//! the README give them. A change of either side without the other fails
//! here (as `scripts/readme-commands.sh` keeps the READMEs' commands true).

use std::path::Path;

fn read(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn assert_states(doc: &str, rel: &str, phrase: &str) {
    assert!(
        doc.contains(phrase),
        "{rel} no longer says {phrase:?}: update it with the code (or this test with the doc)"
    );
}

#[test]
fn format_md_states_the_versions_the_code_has() {
    let doc = read("docs/FORMAT.md");
    let v = filterstore::FORMAT_VERSION;
    let min = filterstore::MIN_READ_VERSION;
    assert_states(
        &doc,
        "docs/FORMAT.md",
        &format!("Current format version: **{v}**."),
    );
    assert_states(
        &doc,
        "docs/FORMAT.md",
        &format!("Oldest version read: **{min}**."),
    );
    #[cfg(feature = "store")]
    {
        let s = filterstore::STORE_FORMAT_VERSION;
        assert_states(
            &doc,
            "docs/FORMAT.md",
            &format!("Current store format: **{s}**"),
        );
    }
}

#[test]
fn the_readme_states_the_versions_the_code_has() {
    let doc = read("README.md")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let (min, v) = (filterstore::MIN_READ_VERSION, filterstore::FORMAT_VERSION);
    assert_states(
        &doc,
        "README.md",
        &format!("reads frame versions {min} to {v}"),
    );
    #[cfg(feature = "store")]
    {
        let s = filterstore::STORE_FORMAT_VERSION;
        assert_states(&doc, "README.md", &format!("in store format {s};"));
        assert_states(
            &doc,
            "README.md",
            &format!("a store of format 1 to {}", s - 1),
        );
    }
}
