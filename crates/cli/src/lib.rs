//! The library behind the `ripcord` binary: configuration, chain building, the chat command and
//! the OpenAI-compatible gateway. The binary (`src/main.rs`) is a thin shell over it, so tests
//! exercise the same code.
#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations, unreachable_pub)]

pub mod build;
pub mod chat;
pub mod config;
pub mod gateway;
pub mod otlp;
pub mod probe_formats;
pub mod routing;
pub mod spend_report;
