//! The store's error.

/// What went wrong in the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store's URL is not one it can use.
    #[error("store url: {0}")]
    Url(String),
    /// The database could not be reached or opened (the URL without its password).
    #[error("could not connect to the store at {0}")]
    Connect(String, #[source] sqlx::Error),
    /// A migration failed.
    #[error("the store's migrations failed")]
    Migrate(#[source] sqlx::migrate::MigrateError),
    /// A query failed.
    #[error("a store query failed")]
    Query(#[source] sqlx::Error),
    /// No key has this id (or it is revoked, for a change that needs a live key).
    #[error("no key {0:?}")]
    NoSuchKey(String),
    /// A key's settings were refused (the field and why).
    #[error("key settings: {0}")]
    KeySpec(String),
    /// The local spool could not be read or written.
    #[error("the ledger spool {path}: {what}")]
    Spool {
        /// The spool file.
        path: String,
        /// What failed.
        what: String,
    },
}
