//! A failed command: who is at fault and what to do, as the API reports it (the body of every
//! answer that is not 2xx).

use serde::{Deserialize, Serialize};

/// Whose fault a failure is; the HTTP status follows from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The request is wrong: fix it (400).
    Invalid,
    /// What it names does not exist (404).
    NotFound,
    /// The router's state forbids it now (409).
    Conflict,
    /// A TCP request without the right token (401).
    Unauthorized,
    /// A change asked for by a read-only user (403).
    Forbidden,
    /// Ours (500).
    Internal,
}

impl ErrorKind {
    pub fn http_status(self) -> u16 {
        match self {
            ErrorKind::Invalid => 400,
            ErrorKind::Unauthorized => 401,
            ErrorKind::Forbidden => 403,
            ErrorKind::NotFound => 404,
            ErrorKind::Conflict => 409,
            ErrorKind::Internal => 500,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiError {
    pub kind: ErrorKind,
    pub message: String,
    /// For configs: one line per error, `file:line:col: field: message`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

impl ApiError {
    pub fn new(kind: ErrorKind, m: impl Into<String>) -> Self {
        Self {
            kind,
            message: m.into(),
            errors: Vec::new(),
        }
    }
    pub fn invalid(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Invalid, m)
    }
    pub fn not_found(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::NotFound, m)
    }
    pub fn conflict(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Conflict, m)
    }
    pub fn internal(m: impl Into<String>) -> Self {
        Self::new(ErrorKind::Internal, m)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)?;
        for e in &self.errors {
            write!(f, "\n{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ApiError {}

pub type ApiResult<T> = Result<T, ApiError>;
