//! The spool: where ledger rows wait, in a bounded local file, while the database is
//! unreachable.
//!
//! One row per line as JSON. The file never grows past its cap: a row that would pass it is
//! counted as dropped (and logged) instead. After the database is back the writer replays the
//! file and removes it; rows carry their own ids, so a replay cut short and started again writes
//! every row once. A line that does not parse (a torn last line after a crash) is counted and
//! logged, never silently skipped.

use std::path::{Path, PathBuf};

use tokio::fs;
use tokio::io::AsyncWriteExt;

use crate::error::StoreError;
use crate::row::LedgerRow;

/// A bounded JSON-lines file of rows.
#[derive(Debug)]
pub(crate) struct Spool {
    path: PathBuf,
    max_bytes: u64,
    /// Bytes in the file as this process knows it.
    len: u64,
}

/// What [`Spool::append`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Appended {
    pub(crate) written: u64,
    pub(crate) dropped: u64,
}

/// What [`Spool::read`] found.
#[derive(Debug, Default)]
pub(crate) struct Read {
    pub(crate) rows: Vec<LedgerRow>,
    pub(crate) corrupt: u64,
}

impl Spool {
    /// The spool at `path`, holding at most `max_bytes`; what a previous run left there is kept.
    pub(crate) async fn open(path: PathBuf, max_bytes: u64) -> Result<Spool, StoreError> {
        if let Some(dir) = path.parent()
            && !dir.as_os_str().is_empty()
        {
            fs::create_dir_all(dir)
                .await
                .map_err(|e| spool_error(&path, "create its directory", &e))?;
        }
        let len = match fs::metadata(&path).await {
            Ok(m) => m.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(spool_error(&path, "read its size", &e)),
        };
        Ok(Spool {
            path,
            max_bytes,
            len,
        })
    }

    /// The file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// True when rows wait in the file.
    pub(crate) fn has_rows(&self) -> bool {
        self.len > 0
    }

    /// Appends `rows` while they fit under the cap; the rest are dropped and counted.
    pub(crate) async fn append(&mut self, rows: &[LedgerRow]) -> Result<Appended, StoreError> {
        let mut buf = Vec::new();
        let mut out = Appended::default();
        for row in rows {
            let mut line =
                serde_json::to_vec(row).map_err(|e| spool_error(&self.path, "encode a row", &e))?;
            line.push(b'\n');
            if self.len + (buf.len() + line.len()) as u64 > self.max_bytes {
                out.dropped += 1;
                continue;
            }
            buf.extend_from_slice(&line);
            out.written += 1;
        }
        if buf.is_empty() {
            return Ok(out);
        }
        let mut f = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .await
            .map_err(|e| spool_error(&self.path, "open", &e))?;
        f.write_all(&buf)
            .await
            .map_err(|e| spool_error(&self.path, "write", &e))?;
        f.flush()
            .await
            .map_err(|e| spool_error(&self.path, "flush", &e))?;
        self.len += buf.len() as u64;
        Ok(out)
    }

    /// Every row in the file, and how many lines did not parse.
    pub(crate) async fn read(&self) -> Result<Read, StoreError> {
        let text = match fs::read(&self.path).await {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Read::default()),
            Err(e) => return Err(spool_error(&self.path, "read", &e)),
        };
        let mut out = Read::default();
        for line in text.split(|b| *b == b'\n') {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            match serde_json::from_slice::<LedgerRow>(line) {
                Ok(r) => out.rows.push(r),
                Err(_) => out.corrupt += 1,
            }
        }
        Ok(out)
    }

    /// Empties the file (after its rows were written).
    pub(crate) async fn clear(&mut self) -> Result<(), StoreError> {
        match fs::remove_file(&self.path).await {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(spool_error(&self.path, "remove", &e)),
        }
        self.len = 0;
        Ok(())
    }
}

fn spool_error(path: &Path, what: &str, e: &dyn std::fmt::Display) -> StoreError {
    StoreError::Spool {
        path: path.display().to_string(),
        what: format!("could not {what}: {e}"),
    }
}
