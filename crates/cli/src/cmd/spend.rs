//! `ripcord spend`: the ledger's report on the command line.

use std::process::ExitCode;

use crate::load;

/// `ripcord spend`: the report on stdout; a bad question or a config without `[store]` is
/// exit code 2, an unreachable database 1.
pub(crate) async fn spend(
    config: Option<&std::path::Path>,
    question: &ripcord_cli::spend_report::SpendQuestion,
    format: &str,
) -> ExitCode {
    use secrecy::ExposeSecret;
    use std::io::Write;
    let cfg = match load(config) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let Some(settings) = &cfg.store else {
        eprintln!("ripcord: the config has no [store], so there is no ledger to read");
        return ExitCode::from(2);
    };
    if format != "json" && format != "csv" {
        eprintln!("ripcord: --format {format:?} is not json or csv");
        return ExitCode::from(2);
    }
    let (filter, group_by, name) = match question.parse() {
        Ok(q) => q,
        Err(b) => {
            eprintln!("ripcord: --{}: {}", b.param.replace('_', "-"), b.message);
            return ExitCode::from(2);
        }
    };
    let url = settings.url.expose_secret();
    let store = match ripcord_store::Store::connect(url, &ripcord_store::StoreOptions::default())
        .await
    {
        Ok(s) => s,
        Err(e) => {
            let cause = std::error::Error::source(&e).map_or(String::new(), |c| format!(": {c}"));
            eprintln!("ripcord: [store]: {e}{cause}");
            return ExitCode::FAILURE;
        }
    };
    let report = match ripcord_cli::spend_report::ask(&store, filter, group_by, name).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ripcord: {e}");
            return ExitCode::FAILURE;
        }
    };
    let body = if format == "csv" {
        report.csv()
    } else {
        serde_json::to_vec_pretty(&report.json())
            .map(|mut v| {
                v.push(b'\n');
                v
            })
            .map_err(|e| e.to_string())
    };
    let written = body.and_then(|b| {
        std::io::stdout()
            .lock()
            .write_all(&b)
            .map_err(|e| e.to_string())
    });
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ripcord: {e}");
            ExitCode::FAILURE
        }
    }
}
