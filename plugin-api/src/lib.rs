//! The one crate that the `xprof` host and every analyzer plugin share.
//!
//! Two halves, split by role (as nushell splits its plugin protocol from its SDK):
//!
//! * [`abi`] — the frozen `abi_stable` root module. It is a thin JSON pipe: three
//!   `extern "C"` functions that pass strings. Everything that evolves (descriptor fields,
//!   envelope fields, context fields) evolves *inside the JSON*, gated by [`PROTOCOL`].
//!   A new root-module field would make every older plugin unloadable (abi_stable accepts
//!   `host fields <= plugin fields` only), so the struct never changes within a major.
//! * [`sdk`] — what a plugin author writes against: the [`sdk::Tool`] trait, the
//!   [`sdk::Params`] schema builder, [`sdk::Call`] (typed argument access plus the record of
//!   inputs read), [`sdk::ToolError`], and the [`export_plugin!`] macro that generates the
//!   root module, runs each tool under `catch_unwind` and turns results into the envelope.
//!
//! See `docs/PLUGINS.md` at the repository root for the vendor guide.

pub mod abi;
pub mod sdk;

pub use abi::{PROTOCOL, PluginMod, PluginModRef};
pub use sdk::{
    Call, ContentType, ErrorKind, Example, Params, ResultBody, Tool, ToolError, ToolOutput,
};

/// Re-exported so that macros expand without the plugin naming these crates itself.
#[doc(hidden)]
pub mod __private {
    pub use abi_stable;
    pub use inventory;
    pub use serde_json;
}
