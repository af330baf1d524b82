//! `ripcord setup-model --gguf`: a GGUF of one's own becomes a `local-onnx` link that answers
//! through `ripcord chat`, and a file it cannot convert is refused with its name.

#![allow(clippy::unwrap_used, clippy::panic)] // test helpers fail the test by panicking

mod support;

use std::path::PathBuf;

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ripcord-own-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    if let Err(e) = std::fs::create_dir_all(&d) {
        panic!("cannot create {}: {e}", d.display());
    }
    d
}

#[test]
fn an_own_gguf_converts_and_answers_through_ripcord_chat() {
    let Some(gguf) = support::require(
        support::cache_dir().join("gguf/SmolLM2-135M-Instruct.Q4_1.gguf"),
        "the SmolLM2 Q4_1 GGUF",
    ) else {
        return;
    };
    let dir = tempdir("chat");
    let model = dir.join("mine");
    let out = support::ripcord()
        .args(["setup-model", "--gguf"])
        .arg(&gguf)
        .arg("--out")
        .arg(&model)
        .args(["--expect", "Paris"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("model_dir = \"{}\"", model.display())),
        "{stdout}"
    );
    for file in [
        "model.onnx",
        "model.q4.onnx",
        "tokenizer.json",
        "tokenizer_config.json",
    ] {
        assert!(model.join(file).is_file(), "{file} missing in {stdout}");
    }

    let config = dir.join("mine.toml");
    std::fs::write(
        &config,
        format!(
            "[chain]\norder = [\"mine\"]\n[[providers]]\nname = \"mine\"\nkind = \"local-onnx\"\nmodel_dir = \"{}\"\n",
            model.display()
        ),
    )
    .unwrap();
    let out = support::ripcord()
        .args(["chat", "--json", "--max-tokens", "24", "--config"])
        .arg(&config)
        .arg("What is the capital of France?")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["served_by"], "mine", "{v}");
    assert!(v["content"].as_str().unwrap().contains("Paris"), "{v}");

    // A second run with the same arguments finds every output in place and converts nothing.
    let again = support::ripcord()
        .args(["setup-model", "--gguf"])
        .arg(&gguf)
        .arg("--out")
        .arg(&model)
        .args(["--expect", "Paris"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(again.status.success(), "{stdout}");
    assert!(stdout.contains("own: reused"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_file_that_is_not_a_gguf_is_refused_by_name() {
    if support::python().is_none() {
        return;
    }
    let dir = tempdir("refuse");
    let bogus = dir.join("notes.gguf");
    std::fs::write(&bogus, b"this is not a model").unwrap();
    let out = support::ripcord()
        .args(["setup-model", "--gguf"])
        .arg(&bogus)
        .arg("--out")
        .arg(dir.join("never"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("not a readable GGUF file"), "{stderr}");
    assert!(stderr.contains(&bogus.display().to_string()), "{stderr}");
    assert!(
        !dir.join("never").exists(),
        "a refused conversion leaves no folder"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn out_without_gguf_is_a_usage_error() {
    let out = support::ripcord()
        .args(["setup-model", "--out", "/tmp/nowhere"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--gguf"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
