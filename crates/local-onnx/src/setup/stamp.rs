//! `setup-model`'s stamp: which step made which files from which inputs, so a second run redoes
//! only what changed.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use super::Tools;

/// A file a step made: its path, size and sha256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FileHash {
    pub(super) path: PathBuf,
    pub(super) size: u64,
    pub(super) sha256: String,
}

/// `<cache>/setup-model.stamp`: per step, its inputs and its outputs' sizes and hashes.
///
/// One line per output: `step<TAB>inputs<TAB>sha256<TAB>size<TAB>path`.
#[derive(Debug, Default)]
pub(super) struct Stamp {
    steps: BTreeMap<String, (String, Vec<FileHash>)>,
}

impl Stamp {
    pub(super) fn read(path: &Path) -> Stamp {
        let mut stamp = Stamp::default();
        let Ok(text) = fs::read_to_string(path) else {
            return stamp;
        };
        for line in text.lines() {
            let f: Vec<&str> = line.splitn(5, '\t').collect();
            if let [step, inputs, sha, size, file] = f[..] {
                let Ok(size) = size.parse() else { continue };
                let entry = stamp
                    .steps
                    .entry(step.to_owned())
                    .or_insert_with(|| (inputs.to_owned(), Vec::new()));
                entry.1.push(FileHash {
                    path: PathBuf::from(file),
                    size,
                    sha256: sha.to_owned(),
                });
            }
        }
        stamp
    }

    fn write(&self, path: &Path) -> Result<(), String> {
        let mut text = String::new();
        for (step, (inputs, files)) in &self.steps {
            for f in files {
                text.push_str(&format!(
                    "{step}\t{inputs}\t{}\t{}\t{}\n",
                    f.sha256,
                    f.size,
                    f.path.display()
                ));
            }
        }
        let tmp = path.with_extension("stamp.part");
        fs::write(&tmp, text).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
        fs::rename(&tmp, path).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    pub(super) fn sha_of(&self, file: &Path) -> Option<String> {
        self.steps
            .values()
            .flat_map(|(_, files)| files)
            .find(|f| f.path == file)
            .map(|f| f.sha256.clone())
    }
}

/// Runs `work` unless the stamp says this step's inputs are unchanged and its outputs exist
/// with the recorded sizes and hashes; then records the outputs.
pub(super) fn step(
    tools: &Tools,
    stamp: &mut Stamp,
    stamp_path: &Path,
    name: &str,
    inputs: &str,
    outputs: &[PathBuf],
    work: impl FnOnce() -> Result<(), String>,
) -> Result<(), String> {
    let say = tools.say;
    if let Some((old_inputs, recorded)) = stamp.steps.get(name) {
        let complete = old_inputs == inputs
            && recorded.len() == outputs.len()
            && outputs.iter().all(|p| {
                recorded
                    .iter()
                    .any(|r| &r.path == p && fs::metadata(p).is_ok_and(|m| m.len() == r.size))
            });
        if complete && tools.sha256(outputs)?.iter().all(|h| recorded.contains(h)) {
            say(&format!(
                "setup-model: {name}: reused (inputs unchanged, {} outputs match their sha256)",
                outputs.len()
            ));
            return Ok(());
        }
        say(&format!("setup-model: {name}: stale or changed, redoing"));
    }
    work()?;
    for p in outputs {
        if !p.is_file() {
            return Err(format!(
                "{name}: expected output {} was not produced",
                p.display()
            ));
        }
    }
    let hashes = tools.sha256(outputs)?;
    for h in &hashes {
        say(&format!(
            "setup-model: {name}: {} ({:.1} MB, sha256 {})",
            h.path.display(),
            h.size as f64 / 1e6,
            &h.sha256[..16]
        ));
    }
    stamp
        .steps
        .insert(name.to_owned(), (inputs.to_owned(), hashes));
    stamp.write(stamp_path)
}
