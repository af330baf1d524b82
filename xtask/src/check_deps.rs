//! `cargo xtask check-deps`: the crate graph's floors and bans, enforced.
//!
//! The floors are read from ARCHITECTURE.md, so the document cannot drift from the code: each
//! crate's direct ripcord imports (`cargo tree`, normal edges) must be exactly its row's, its
//! floor one above its highest import, and the drawing must put it on that floor.
//!
//! `ripcord-core` must not depend (directly or transitively) on an HTTP stack, ONNX Runtime,
//! OpenTelemetry, a rate limiter or a breaker: that is what keeps the contract light and lets
//! every other crate depend on it. The other bans keep each floor light (see ARCHITECTURE.md): resilience pulls
//! no HTTP stack or ONNX Runtime, the local model no HTTP client, and providers, telemetry and
//! redis no ONNX Runtime.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const BANS: &[(&str, &[&str])] = &[
    (
        "ripcord-core",
        &[
            "reqwest",
            "hyper",
            "http",
            "ort",
            "opentelemetry",
            "governor",
            "failsafe",
        ],
    ),
    ("ripcord-resilience", &["reqwest", "hyper", "ort"]),
    ("ripcord-providers", &["ort"]),
    ("ripcord-local-onnx", &["reqwest"]),
    ("ripcord-telemetry", &["ort"]),
    ("ripcord-redis", &["ort"]),
];

/// `cargo tree -p KRATE -e normal` with `extra` arguments, one package per line.
fn tree(krate: &str, extra: &[&str]) -> Result<String, String> {
    let out = crate::cargo::cargo()
        .args([
            "tree", "-p", krate, "-e", "normal", "--prefix", "none", "--format", "{p}",
        ])
        .args(extra)
        .output()
        .map_err(|e| format!("could not run cargo tree: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo tree -p {krate} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// One row of ARCHITECTURE.md's floor table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Row {
    pub(crate) floor: u32,
    pub(crate) krate: String,
    pub(crate) imports: BTreeSet<String>,
}

/// The short names the table uses (`core`) as package names (`ripcord-core`).
fn package(short: &str) -> String {
    let short = short.trim().trim_matches('`');
    if short == "xtask" || short.starts_with("ripcord-") {
        short.to_owned()
    } else {
        format!("ripcord-{short}")
    }
}

/// The floor table (`| floor | crate | imports | holds |`) and the drawing's floor of each crate
/// it names, from the text of ARCHITECTURE.md. Errors name the line.
pub(crate) fn parse_floors(doc: &str) -> Result<(Vec<Row>, BTreeMap<String, u32>), String> {
    let section = doc
        .split("## The floors")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .ok_or("ARCHITECTURE.md has no \"## The floors\" section")?;
    let mut rows = Vec::new();
    let mut drawn = BTreeMap::new();
    let mut in_drawing = false;
    for (n, line) in section.lines().enumerate() {
        if line.starts_with("```") {
            in_drawing = !in_drawing;
            continue;
        }
        if in_drawing {
            // A floor's line starts with its number; the lines under it describe it.
            let mut words = line.split_whitespace();
            if let Some(floor) = words.next().and_then(|w| w.parse::<u32>().ok()) {
                for w in words {
                    let w = w.trim_matches(|c: char| !(c.is_alphanumeric() || c == '-'));
                    if w.starts_with("ripcord-") || w == "xtask" {
                        drawn.insert(w.to_owned(), floor);
                    }
                }
            }
            continue;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // `| 1 | `ripcord-core` | — | holds |` splits into ["", "1", crate, imports, holds, ""].
        if cells.len() < 5 || !cells[0].is_empty() {
            continue;
        }
        let Ok(floor) = cells[1].parse::<u32>() else {
            continue;
        };
        let imports = if cells[3] == "—" || cells[3] == "-" {
            BTreeSet::new()
        } else {
            cells[3].split(',').map(package).collect()
        };
        if imports.iter().any(|i: &String| i.contains(' ')) {
            return Err(format!(
                "ARCHITECTURE.md floor table, row {}: imports must be crate names separated by commas, got {:?}",
                n + 1,
                cells[3]
            ));
        }
        rows.push(Row {
            floor,
            krate: package(cells[2]),
            imports,
        });
    }
    if rows.is_empty() {
        return Err("ARCHITECTURE.md's floors section has no table rows".to_owned());
    }
    Ok((rows, drawn))
}

/// What is wrong with the table itself, or between it and the drawing: a floor that is not one
/// above the row's highest import, an import with no row, a crate drawn on another floor.
pub(crate) fn check_floors(rows: &[Row], drawn: &BTreeMap<String, u32>) -> Vec<String> {
    let floor_of: BTreeMap<&str, u32> = rows.iter().map(|r| (r.krate.as_str(), r.floor)).collect();
    let mut failures = Vec::new();
    for r in rows {
        let mut highest = 0;
        for i in &r.imports {
            match floor_of.get(i.as_str()) {
                Some(f) => highest = highest.max(*f),
                None => failures.push(format!(
                    "ARCHITECTURE.md: {} imports {i}, which has no row in the floor table",
                    r.krate
                )),
            }
        }
        if r.floor != highest + 1 {
            failures.push(format!(
                "ARCHITECTURE.md: {} is on floor {} but its highest import is on floor {highest}, so it belongs on floor {}",
                r.krate,
                r.floor,
                highest + 1
            ));
        }
        match drawn.get(&r.krate) {
            Some(f) if *f == r.floor => {}
            Some(f) => failures.push(format!(
                "ARCHITECTURE.md: the drawing puts {} on floor {f}, the table on floor {}",
                r.krate, r.floor
            )),
            None => failures.push(format!(
                "ARCHITECTURE.md: the drawing does not show {}",
                r.krate
            )),
        }
    }
    failures
}

/// What differs between a row and the crate's real direct ripcord imports.
pub(crate) fn check_imports(row: &Row, real: &BTreeSet<String>) -> Vec<String> {
    let mut failures = Vec::new();
    for extra in real.difference(&row.imports) {
        failures.push(format!(
            "{} imports {extra}, which its row in ARCHITECTURE.md does not list",
            row.krate
        ));
    }
    for missing in row.imports.difference(real) {
        failures.push(format!(
            "ARCHITECTURE.md says {} imports {missing}, but its Cargo.toml does not",
            row.krate
        ));
    }
    failures
}

/// Runs the check.
pub(crate) fn run(_args: &[String]) -> Result<(), String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ARCHITECTURE.md");
    let doc = std::fs::read_to_string(&path)
        .map_err(|e| format!("could not read {}: {e}", path.display()))?;
    let (rows, drawn) = parse_floors(&doc)?;
    let mut failures = check_floors(&rows, &drawn);
    for row in &rows {
        let direct = tree(&row.krate, &["--depth", "1"])?;
        let real: BTreeSet<String> = direct
            .lines()
            .skip(1)
            .filter_map(|l| l.split_whitespace().next())
            .filter(|n| n.starts_with("ripcord-"))
            .map(str::to_owned)
            .collect();
        failures.extend(check_imports(row, &real));
        println!(
            "check-deps: {} (floor {}) imports {:?}",
            row.krate, row.floor, row.imports
        );
    }
    for (krate, banned) in BANS {
        for line in tree(krate, &[])?.lines() {
            let name = line.split_whitespace().next().unwrap_or("");
            if banned.contains(&name) {
                failures.push(format!("{krate} depends on banned crate {line}"));
            }
        }
        println!("check-deps: {krate}: none of {banned:?}");
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc() -> String {
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../ARCHITECTURE.md"))
            .unwrap()
    }

    #[test]
    fn the_document_is_consistent() {
        let (rows, drawn) = parse_floors(&doc()).unwrap();
        assert!(rows.len() >= 10, "{rows:?}");
        assert_eq!(check_floors(&rows, &drawn), Vec::<String>::new());
        let core = rows.iter().find(|r| r.krate == "ripcord-core").unwrap();
        assert_eq!(core.floor, 1);
        assert!(core.imports.is_empty());
    }

    #[test]
    fn a_wrong_floor_a_wrong_drawing_and_a_wrong_import_are_named() {
        let wrong = doc()
            .replace("| 3 | `ripcord-redis`", "| 4 | `ripcord-redis`")
            .replace(" 2  ripcord-resilience", " 1  ripcord-resilience");
        let (rows, drawn) = parse_floors(&wrong).unwrap();
        let failures = check_floors(&rows, &drawn).join("\n");
        assert!(
            failures.contains("ripcord-redis is on floor 4 but its highest import is on floor 2"),
            "{failures}"
        );
        assert!(
            failures
                .contains("the drawing puts ripcord-resilience on floor 1, the table on floor 2"),
            "{failures}"
        );
        let redis = rows.iter().find(|r| r.krate == "ripcord-redis").unwrap();
        let real: BTreeSet<String> = ["ripcord-core", "ripcord-providers"]
            .map(str::to_owned)
            .into();
        let failures = check_imports(redis, &real).join("\n");
        assert!(failures.contains("ripcord-redis imports ripcord-providers, which its row"));
        assert!(failures.contains(
            "says ripcord-redis imports ripcord-resilience, but its Cargo.toml does not"
        ));
    }
}
