//! Where Bedrock credentials come from: access keys (long-term, or temporary with a session
//! token), a named profile of the shared credentials file, or a Bedrock API key.
//!
//! The order [`BedrockCredentials::from_env`] follows is the AWS SDKs' for the sources it
//! supports: a Bedrock API key (`AWS_BEARER_TOKEN_BEDROCK`) when set — the SDKs switch to
//! bearer auth for Bedrock when it is present — then `AWS_ACCESS_KEY_ID` /
//! `AWS_SECRET_ACCESS_KEY` / `AWS_SESSION_TOKEN`, then the profile (`AWS_PROFILE`, else
//! `default`) of the shared credentials file (`AWS_SHARED_CREDENTIALS_FILE`, else
//! `~/.aws/credentials`). Profiles that only name another way to get keys (SSO, a
//! `credential_process`, an assumed role) are refused with an error that says so rather than
//! silently skipped: ripcord does not run those flows.
//!
//! The environment is read through a function so tests (and embedders) can pass their own
//! without touching the process environment.

use std::fmt;
use std::path::{Path, PathBuf};

use ripcord_core::{Error, ErrorKind, Result};
use secrecy::{ExposeSecret, SecretString};

/// The environment variable holding a Bedrock API key.
pub const BEDROCK_API_KEY_ENV: &str = "AWS_BEARER_TOKEN_BEDROCK";

/// Where a set of credentials was found, for `check-config` and error messages (never the
/// secret itself).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CredentialSource {
    /// Given in code or in the config file.
    Explicit,
    /// `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` (/ `AWS_SESSION_TOKEN`).
    Environment,
    /// `AWS_BEARER_TOKEN_BEDROCK`.
    ApiKeyEnvironment,
    /// A profile of a shared credentials file.
    Profile {
        /// The profile's name.
        profile: String,
        /// The file.
        file: PathBuf,
    },
}

impl fmt::Display for CredentialSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CredentialSource::Explicit => f.write_str("explicit"),
            CredentialSource::Environment => f.write_str("env AWS_ACCESS_KEY_ID"),
            CredentialSource::ApiKeyEnvironment => write!(f, "env {BEDROCK_API_KEY_ENV}"),
            CredentialSource::Profile { profile, file } => {
                write!(f, "profile {profile} in {}", file.display())
            }
        }
    }
}

/// Credentials for Bedrock: SigV4 access keys or a Bedrock API key.
///
/// `Debug` shows the access key id (it is an identifier, not a secret, and it is what an
/// operator looks for) and the source; secrets print as `[redacted]`.
///
/// # Examples
///
/// ```
/// use ripcord_providers::BedrockCredentials;
/// let c = BedrockCredentials::keys("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG", None);
/// assert!(!format!("{c:?}").contains("wJalr"));
/// let env = |name: &str| (name == "AWS_BEARER_TOKEN_BEDROCK").then(|| "bedrock-api-key-123".to_owned());
/// let k = BedrockCredentials::from_env_with(&env, None)?;
/// assert!(k.is_api_key());
/// # Ok::<(), ripcord_core::Error>(())
/// ```
#[derive(Clone)]
pub struct BedrockCredentials {
    pub(super) secret: Secret,
    source: CredentialSource,
}

#[derive(Clone)]
pub(super) enum Secret {
    Keys {
        access_key_id: String,
        secret_access_key: SecretString,
        session_token: Option<SecretString>,
    },
    ApiKey(SecretString),
}

impl fmt::Debug for BedrockCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.secret {
            Secret::Keys {
                access_key_id,
                session_token,
                ..
            } => f
                .debug_struct("BedrockCredentials")
                .field("access_key_id", access_key_id)
                .field("secret_access_key", &"[redacted]")
                .field(
                    "session_token",
                    &session_token.as_ref().map(|_| "[redacted]"),
                )
                .field("source", &self.source)
                .finish(),
            Secret::ApiKey(_) => f
                .debug_struct("BedrockCredentials")
                .field("api_key", &"[redacted]")
                .field("source", &self.source)
                .finish(),
        }
    }
}

impl BedrockCredentials {
    /// Access keys; `session_token` for temporary ones (`ASIA…`).
    pub fn keys(
        access_key_id: impl Into<String>,
        secret_access_key: impl Into<SecretString>,
        session_token: Option<SecretString>,
    ) -> Self {
        BedrockCredentials {
            secret: Secret::Keys {
                access_key_id: access_key_id.into(),
                secret_access_key: secret_access_key.into(),
                session_token,
            },
            source: CredentialSource::Explicit,
        }
    }

    /// A Bedrock API key, sent as `Authorization: Bearer …` instead of a signature.
    pub fn api_key(key: impl Into<SecretString>) -> Self {
        BedrockCredentials {
            secret: Secret::ApiKey(key.into()),
            source: CredentialSource::Explicit,
        }
    }

    /// Where these credentials were found.
    pub fn source(&self) -> &CredentialSource {
        &self.source
    }

    /// True for a Bedrock API key (bearer auth), false for SigV4 keys.
    pub fn is_api_key(&self) -> bool {
        matches!(self.secret, Secret::ApiKey(_))
    }

    /// The access key id (SigV4 keys only).
    pub fn access_key_id(&self) -> Option<&str> {
        match &self.secret {
            Secret::Keys { access_key_id, .. } => Some(access_key_id),
            Secret::ApiKey(_) => None,
        }
    }

    /// Reads the process environment (see the module docs for the order), with `profile`
    /// overriding `AWS_PROFILE`.
    ///
    /// # Errors
    ///
    /// `Auth` when no source has credentials, naming every place looked at; when a profile
    /// exists but holds no keys; or when the credentials file cannot be read.
    pub fn from_env(profile: Option<&str>) -> Result<Self> {
        BedrockCredentials::from_env_with(&crate::http::env, profile)
    }

    /// [`BedrockCredentials::from_env`] over another environment: `env(name)` returns a
    /// variable's value (empty counts as unset).
    ///
    /// # Errors
    ///
    /// As [`BedrockCredentials::from_env`].
    pub fn from_env_with(
        env: &dyn Fn(&str) -> Option<String>,
        profile: Option<&str>,
    ) -> Result<Self> {
        let get = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        // A profile named in code or config is a deliberate choice: it wins over ambient keys.
        if let Some(p) = profile {
            return BedrockCredentials::from_profile_with(env, p, None);
        }
        if let Some(key) = get(BEDROCK_API_KEY_ENV) {
            return Ok(BedrockCredentials {
                secret: Secret::ApiKey(SecretString::from(key)),
                source: CredentialSource::ApiKeyEnvironment,
            });
        }
        match (get("AWS_ACCESS_KEY_ID"), get("AWS_SECRET_ACCESS_KEY")) {
            (Some(id), Some(secret)) => {
                return Ok(BedrockCredentials {
                    secret: Secret::Keys {
                        access_key_id: id.trim().to_owned(),
                        secret_access_key: SecretString::from(secret.trim().to_owned()),
                        session_token: get("AWS_SESSION_TOKEN")
                            .map(|t| SecretString::from(t.trim().to_owned())),
                    },
                    source: CredentialSource::Environment,
                });
            }
            (Some(_), None) => {
                return Err(auth(
                    "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not".to_owned(),
                ));
            }
            (None, Some(_)) => {
                return Err(auth(
                    "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not".to_owned(),
                ));
            }
            (None, None) => {}
        }
        let profile = get("AWS_PROFILE").unwrap_or_else(|| "default".to_owned());
        let file = credentials_file(env);
        match file.as_deref().map(std::fs::read_to_string) {
            Some(Ok(text)) => from_ini(&text, &profile, file.as_deref()),
            Some(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => Err(auth(format!(
                "no credentials: {BEDROCK_API_KEY_ENV} and AWS_ACCESS_KEY_ID are unset and the \
                 shared credentials file {} does not exist",
                display(file.as_deref())
            ))),
            Some(Err(e)) => Err(auth(format!(
                "cannot read the shared credentials file {}: {e}",
                display(file.as_deref())
            ))
            .with_source(e)),
            None => Err(auth(format!(
                "no credentials: {BEDROCK_API_KEY_ENV}, AWS_ACCESS_KEY_ID, \
                 AWS_SHARED_CREDENTIALS_FILE and HOME are all unset"
            ))),
        }
    }

    /// The keys of `profile` in a shared credentials file: `file`, else
    /// `AWS_SHARED_CREDENTIALS_FILE`, else `~/.aws/credentials` (read from `env`).
    ///
    /// # Errors
    ///
    /// `Auth` when the file cannot be read, the profile is missing or holds no keys.
    pub fn from_profile_with(
        env: &dyn Fn(&str) -> Option<String>,
        profile: &str,
        file: Option<&Path>,
    ) -> Result<Self> {
        let file = match file {
            Some(f) => Some(f.to_owned()),
            None => credentials_file(env),
        };
        let Some(path) = file else {
            return Err(auth(format!(
                "profile {profile:?}: no shared credentials file (AWS_SHARED_CREDENTIALS_FILE \
                 and HOME are unset)"
            )));
        };
        let text = std::fs::read_to_string(&path).map_err(|e| {
            auth(format!(
                "profile {profile:?}: cannot read the shared credentials file {}: {e}",
                path.display()
            ))
            .with_source(e)
        })?;
        from_ini(&text, profile, Some(&path))
    }
}

fn auth(message: String) -> Error {
    Error::new(ErrorKind::Auth, format!("bedrock: {message}"))
}

fn display(p: Option<&Path>) -> String {
    p.map_or_else(|| "(none)".to_owned(), |p| p.display().to_string())
}

/// `AWS_SHARED_CREDENTIALS_FILE`, else `$HOME/.aws/credentials` (`USERPROFILE` on Windows).
fn credentials_file(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let get = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    if let Some(f) = get("AWS_SHARED_CREDENTIALS_FILE") {
        return Some(expand_home(&f, env));
    }
    let home = get("HOME").or_else(|| get("USERPROFILE"))?;
    Some(Path::new(&home).join(".aws").join("credentials"))
}

fn expand_home(path: &str, env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    match (path.strip_prefix("~/"), env("HOME")) {
        (Some(rest), Some(home)) => Path::new(&home).join(rest),
        _ => PathBuf::from(path),
    }
}

/// Reads `profile` from the text of a shared credentials file: `[name]` sections of
/// `key = value` lines, `#` and `;` comments. (The config file's `[profile name]` spelling is
/// accepted too.)
fn from_ini(text: &str, profile: &str, file: Option<&Path>) -> Result<BedrockCredentials> {
    let mut in_profile = false;
    let mut found = false;
    let mut id = None;
    let mut secret = None;
    let mut token = None;
    let mut other_keys: Vec<String> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(section) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let section = section.trim();
            let name = section.strip_prefix("profile ").unwrap_or(section).trim();
            in_profile = name == profile;
            found |= in_profile;
            continue;
        }
        if !in_profile {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let (key, value) = (key.trim().to_ascii_lowercase(), value.trim().to_owned());
        match key.as_str() {
            "aws_access_key_id" => id = Some(value),
            "aws_secret_access_key" => secret = Some(value),
            "aws_session_token" => token = Some(value),
            _ => other_keys.push(key),
        }
    }
    let at = display(file);
    if !found {
        return Err(auth(format!("profile {profile:?} is not in {at}")));
    }
    match (
        id.filter(|v| !v.is_empty()),
        secret.filter(|v| !v.is_empty()),
    ) {
        (Some(access_key_id), Some(secret)) => Ok(BedrockCredentials {
            secret: Secret::Keys {
                access_key_id,
                secret_access_key: SecretString::from(secret),
                session_token: token.filter(|t| !t.is_empty()).map(SecretString::from),
            },
            source: CredentialSource::Profile {
                profile: profile.to_owned(),
                file: file.map(Path::to_owned).unwrap_or_default(),
            },
        }),
        _ => {
            let flows = [
                "sso_session",
                "sso_start_url",
                "credential_process",
                "role_arn",
            ];
            let hint = match other_keys.iter().find(|k| flows.contains(&k.as_str())) {
                Some(k) => format!(
                    " (it uses `{k}`, which ripcord does not run: export the keys, or use a \
                     Bedrock API key)"
                ),
                None => String::new(),
            };
            Err(auth(format!(
                "profile {profile:?} in {at} has no aws_access_key_id and \
                 aws_secret_access_key{hint}"
            )))
        }
    }
}

impl Secret {
    /// The secret values, to scrub them from vendor text.
    pub(super) fn exposed(&self) -> Vec<&str> {
        match self {
            Secret::Keys {
                secret_access_key,
                session_token,
                ..
            } => {
                let mut v = vec![secret_access_key.expose_secret()];
                if let Some(t) = session_token {
                    v.push(t.expose_secret());
                }
                v
            }
            Secret::ApiKey(k) => vec![k.expose_secret()],
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |name| map.get(name).cloned()
    }

    const FILE: &str = "\
# shared credentials
[default]
aws_access_key_id = AKIDDEFAULT
aws_secret_access_key = secret-default

[work]
aws_access_key_id=ASIAWORK
aws_secret_access_key=secret-work
aws_session_token = token-work
; a comment

[sso]
sso_session = corp
";

    #[test]
    fn ini_profiles_and_their_errors() {
        let c = from_ini(FILE, "work", Some(Path::new("/x/credentials"))).unwrap();
        assert_eq!(c.access_key_id(), Some("ASIAWORK"));
        let Secret::Keys { session_token, .. } = &c.secret else {
            panic!("keys expected")
        };
        assert_eq!(
            session_token.as_ref().unwrap().expose_secret(),
            "token-work"
        );
        assert_eq!(c.source().to_string(), "profile work in /x/credentials");
        let d = from_ini(FILE, "default", None).unwrap();
        assert_eq!(d.access_key_id(), Some("AKIDDEFAULT"));
        let e = from_ini(FILE, "nope", None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Auth);
        assert!(e.message().contains("\"nope\" is not in"), "{e}");
        let e = from_ini(FILE, "sso", None).unwrap_err();
        assert!(e.message().contains("sso_session"), "{e}");
        // Never a secret in an error or in Debug.
        assert!(!format!("{c:?}").contains("secret-work"));
        assert!(!format!("{c:?}").contains("token-work"));
    }

    #[test]
    fn environment_order_api_key_then_keys_then_profile() {
        let dir = std::env::temp_dir().join(format!("ripcord-creds-{}", std::process::id()));
        std::fs::create_dir_all(dir.join(".aws")).unwrap();
        std::fs::write(dir.join(".aws").join("credentials"), FILE).unwrap();
        let home = dir.to_str().unwrap();

        let all = env_of(&[
            (BEDROCK_API_KEY_ENV, "bedrock-key"),
            ("AWS_ACCESS_KEY_ID", "AKIDENV"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("HOME", home),
        ]);
        let c = BedrockCredentials::from_env_with(&all, None).unwrap();
        assert!(c.is_api_key());
        assert_eq!(c.source(), &CredentialSource::ApiKeyEnvironment);

        let keys = env_of(&[
            ("AWS_ACCESS_KEY_ID", "AKIDENV"),
            ("AWS_SECRET_ACCESS_KEY", "s"),
            ("AWS_SESSION_TOKEN", "t"),
            ("HOME", home),
        ]);
        let c = BedrockCredentials::from_env_with(&keys, None).unwrap();
        assert_eq!(c.access_key_id(), Some("AKIDENV"));
        assert_eq!(c.source(), &CredentialSource::Environment);
        // A named profile beats ambient keys.
        let c = BedrockCredentials::from_env_with(&keys, Some("work")).unwrap();
        assert_eq!(c.access_key_id(), Some("ASIAWORK"));

        let half = env_of(&[("AWS_ACCESS_KEY_ID", "AKIDENV")]);
        let e = BedrockCredentials::from_env_with(&half, None).unwrap_err();
        assert!(e.message().contains("AWS_SECRET_ACCESS_KEY is not"), "{e}");

        let file_only = env_of(&[("HOME", home), ("AWS_PROFILE", "work")]);
        let c = BedrockCredentials::from_env_with(&file_only, None).unwrap();
        assert_eq!(c.access_key_id(), Some("ASIAWORK"));
        let default = env_of(&[("HOME", home)]);
        let c = BedrockCredentials::from_env_with(&default, None).unwrap();
        assert_eq!(c.access_key_id(), Some("AKIDDEFAULT"));

        let elsewhere = dir.join("other-credentials");
        std::fs::write(
            &elsewhere,
            "[default]\naws_access_key_id=AKIDOTHER\naws_secret_access_key=o\n",
        )
        .unwrap();
        let moved = env_of(&[
            ("HOME", home),
            ("AWS_SHARED_CREDENTIALS_FILE", elsewhere.to_str().unwrap()),
        ]);
        let c = BedrockCredentials::from_env_with(&moved, None).unwrap();
        assert_eq!(c.access_key_id(), Some("AKIDOTHER"));

        let nothing = env_of(&[("HOME", "/nonexistent-ripcord-home")]);
        let e = BedrockCredentials::from_env_with(&nothing, None).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Auth);
        assert!(e.message().contains("does not exist"), "{e}");
        let e = BedrockCredentials::from_env_with(&env_of(&[]), None).unwrap_err();
        assert!(e.message().contains("all unset"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
