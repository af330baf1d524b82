//! The `local-onnx` rows of the vendor error table (`ripcord-chaos`'s
//! `fixtures/vendor_errors.toml`).
//!
//! A local model has no wire, so its rows are its own failure conditions — a missing folder or
//! file, a corrupt file, an unusable runtime library, a bad setting — each provoked here on a
//! copy of the tiny test model and checked for the row's kind and disposition, like the wire
//! rows are for the HTTP adapters. This file is its own test process with a single test: the
//! missing-library case must run before any ONNX Runtime is loaded in the process.

mod common;

use std::fs;
use std::path::Path;

use ripcord_chaos::vendor_table::{self, Row};
use ripcord_core::{ChatModel, ChatRequest, Context, Error};
use ripcord_local_onnx::{LocalLlama, Variant};

#[allow(clippy::unwrap_used)] // test setup
async fn provoke(case: &str, tiny: &Path, scratch: &Path) -> Result<Error, String> {
    let copy = |name: &str| common::copy_model(tiny, name);
    // The file a default build loads (the default variant's, which the tiny model has).
    let model_file = Variant::default().file_name();
    let built = match case {
        "missing_runtime_library" => LocalLlama::builder(tiny)
            .ort_dylib(scratch.join("libonnxruntime.so.0.0.0"))
            .build(),
        "missing_folder" => LocalLlama::load(scratch.join("no-such-model")),
        "missing_model_file" | "missing_tokenizer" | "missing_config" => {
            let file = match case {
                "missing_model_file" => model_file,
                "missing_tokenizer" => "tokenizer.json",
                _ => "config.json",
            };
            let dir = copy(case);
            fs::remove_file(dir.join(file)).unwrap();
            // Named explicitly: without it a missing default file falls back to model.onnx.
            LocalLlama::builder(&dir)
                .variant(Variant::default())
                .eager(false)
                .build()
        }
        "truncated_model_file" | "lazy_truncated_model_on_call" => {
            let dir = copy(case);
            let bytes = fs::read(dir.join(model_file)).unwrap();
            fs::write(dir.join(model_file), &bytes[..bytes.len() / 3]).unwrap();
            if case == "truncated_model_file" {
                LocalLlama::load(&dir)
            } else {
                // Built lazily it loads; the first call fails with the load error.
                let m = LocalLlama::builder(&dir)
                    .eager(false)
                    .build()
                    .map_err(|e| format!("the lazy build failed early: {e}"))?;
                return match m.chat(&ChatRequest::user("hi"), &Context::new()).await {
                    Ok(r) => Err(format!("answered {:?}", r.content)),
                    Err(e) => Ok(e),
                };
            }
        }
        "corrupt_tokenizer" => {
            let dir = copy(case);
            fs::write(dir.join("tokenizer.json"), b"{\"model\": 42}").unwrap();
            LocalLlama::load(&dir)
        }
        "config_mismatch" => {
            let dir = copy(case);
            let cfg = fs::read_to_string(dir.join("config.json")).unwrap();
            fs::write(
                dir.join("config.json"),
                cfg.replace("\"num_key_value_heads\": 2", "\"num_key_value_heads\": 4"),
            )
            .unwrap();
            LocalLlama::load(&dir)
        }
        "zero_threads" => LocalLlama::builder(tiny).threads(0).build(),
        other => return Err(format!("unknown local case {other:?}")),
    };
    match built {
        Ok(_) => Err("the model loaded".to_owned()),
        Err(e) => Ok(e),
    }
}

fn check(row: &Row, e: &Error) -> Result<(), String> {
    let kind = row.expected_kind()?;
    let disposition = row.expected_disposition()?;
    if e.kind() != kind || e.disposition() != disposition {
        return Err(format!(
            "{} / {:?} (expected {kind} / {disposition:?}): {e}",
            e.kind(),
            e.disposition()
        ));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::unwrap_used, clippy::panic)] // the test fails by panicking
async fn every_local_row_gets_its_kind_and_disposition() {
    let Some(tiny) = common::tiny() else { return };
    let mut rows: Vec<Row> = vendor_table::rows()
        .unwrap()
        .into_iter()
        .filter(|r| r.vendor == "local-onnx")
        .collect();
    assert!(rows.len() >= 8, "only {} local rows", rows.len());
    // No runtime may be loaded before the missing-library case.
    rows.sort_by_key(|r| r.case.as_deref() != Some("missing_runtime_library"));
    let scratch = common::temp_dir("table");
    let mut failures = Vec::new();
    for row in &rows {
        let case = row.case.as_deref().unwrap_or_default();
        let outcome = match provoke(case, &tiny, &scratch).await {
            Ok(e) => check(row, &e),
            Err(why) => Err(why),
        };
        if let Err(why) = outcome {
            failures.push(format!("{}: {why}", row.label()));
        }
    }
    let _ = fs::remove_dir_all(&scratch);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
