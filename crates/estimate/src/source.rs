//! Where published figures come from ([`Source`]): the validation files
//! ([`crate::validate`]) and the sustained-load thermal traces ([`crate::thermal`]) each cite
//! one. Plain data, a leaf.

use serde::{Deserialize, Serialize};

/// Where a file's measurements come from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Source {
    /// Id (the file stem).
    pub id: String,
    /// `github-file`, `github-issue`, `paper`, ...
    #[serde(default)]
    pub kind: Option<String>,
    /// owner/name.
    #[serde(default)]
    pub repo: Option<String>,
    /// File and commit, issue number, or table.
    #[serde(default, rename = "ref")]
    pub reference: Option<String>,
    /// Address.
    #[serde(default)]
    pub url: Option<String>,
    /// Title.
    #[serde(default)]
    pub title: Option<String>,
    /// Date.
    #[serde(default)]
    pub date: Option<String>,
}
