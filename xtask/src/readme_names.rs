//! The README's library section names only items the crates export: a test reads every
//! CamelCase name in backticks there (`RetryPolicy`, `ripcord_core::Decorator`,
//! `ChatModelExt`'s …) and looks for its public definition or re-export in a library crate's
//! `src` (not the binary's, whose config has a `RetrySettings`).
//! (A newcomer once followed `RetrySettings` / `BreakerSettings`, which the library did not
//! export.)

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// The `## Using the library` section, up to the next `## ` heading.
    fn library_section(readme: &str) -> &str {
        let start = readme
            .find("## Using the library")
            .expect("README.md has a `## Using the library` section");
        let rest = &readme[start + 3..];
        let end = rest.find("\n## ").map_or(rest.len(), |i| i + 3);
        &readme[start..start + end]
    }

    /// Every `Name`, `path::Name`, `Name::item` or `Name()` in backticks whose last type-like
    /// segment is CamelCase.
    fn names(section: &str) -> Vec<String> {
        let mut out: Vec<String> = section
            .split('`')
            .skip(1)
            .step_by(2)
            .filter_map(|code| {
                let code = code.trim_end_matches("()");
                code.split("::")
                    .find(|seg| {
                        seg.chars().next().is_some_and(|c| c.is_ascii_uppercase())
                            && seg.chars().all(|c| c.is_ascii_alphanumeric())
                            && seg.chars().any(|c| c.is_ascii_lowercase())
                    })
                    .map(str::to_owned)
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }

    fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let p = entry.path();
            if p.is_dir() {
                sources(&p, out);
            } else if p.extension().is_some_and(|e| e == "rs") {
                out.push(p);
            }
        }
    }

    /// True when `src` defines `name` publicly or re-exports it.
    fn exports(src: &str, name: &str) -> bool {
        let defined = ["struct", "enum", "trait", "type", "const", "fn"]
            .iter()
            .any(|kind| src.contains(&format!("pub {kind} {name}")));
        defined
            || src.match_indices("pub use ").any(|(i, _)| {
                let stmt = &src[i..src[i..].find(';').map_or(src.len(), |e| i + e)];
                stmt.split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
                    .any(|w| w == name)
            })
    }

    #[test]
    fn every_name_the_readme_s_library_section_uses_is_exported() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
        let mut files = Vec::new();
        // The library crates: the binary's own config types (`RetrySettings`, …) do not count.
        for krate in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
            if ["cli", "bench"].iter().any(|c| krate.file_name() == *c) {
                continue;
            }
            let src = krate.path().join("src");
            if src.is_dir() {
                sources(&src, &mut files);
            }
        }
        let all: String = files
            .iter()
            .map(|f| std::fs::read_to_string(f).unwrap())
            .collect();
        let names = names(library_section(&readme));
        assert!(names.len() >= 10, "too few names found: {names:?}");
        let missing: Vec<&String> = names.iter().filter(|n| !exports(&all, n)).collect();
        assert!(
            missing.is_empty(),
            "README.md's library section names items no crate exports: {missing:?}"
        );
    }

    #[test]
    fn names_are_read_from_backticks_and_paths() {
        let s = "## Using the library\nuse `ripcord_core::Decorator` and `RetryPolicy`, \
                 `policy.wrap(model)`, `ChatModelExt`'s `with_*`, `Vendor::ALL`\n## Next";
        assert_eq!(
            names(library_section(s)),
            ["ChatModelExt", "Decorator", "RetryPolicy", "Vendor"]
        );
        assert!(exports("pub use a::{B, RetryPolicy};", "RetryPolicy"));
        assert!(!exports("pub use a::RetryPolicyBuilder;", "RetryPolicy"));
    }
}
