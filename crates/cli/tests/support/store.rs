//! Databases for the `[store]` tests: a temp directory for a SQLite file, and a fresh database
//! on the Postgres server `RIPCORD_TEST_POSTGRES_URL` names (`cargo xtask test` starts one).

#![allow(dead_code, clippy::unwrap_used, clippy::print_stderr)]

use std::path::PathBuf;

/// A temp directory removed on drop.
pub(crate) struct Dir(pub(crate) PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(crate) fn temp_dir(test: &str) -> Dir {
    let d = std::env::temp_dir().join(format!(
        "ripcord-ledger-{test}-{}-{}",
        std::process::id(),
        ripcord_store::new_row_id()
    ));
    std::fs::create_dir_all(&d).unwrap();
    Dir(d)
}

/// A fresh database on the test Postgres, or `None` with the reason printed.
pub(crate) async fn postgres_db() -> Option<String> {
    let Ok(base) = std::env::var("RIPCORD_TEST_POSTGRES_URL") else {
        eprintln!(
            "skipped: RIPCORD_TEST_POSTGRES_URL is not set (cargo xtask test starts a Postgres)"
        );
        return None;
    };
    let name = format!("l{}", &ripcord_store::new_row_id()[..16]);
    use sqlx::Connection;
    let mut c = sqlx::PgConnection::connect(&base).await.unwrap();
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut c)
        .await
        .unwrap();
    let (root, _) = base.rsplit_once('/').unwrap();
    Some(format!("{root}/{name}"))
}
