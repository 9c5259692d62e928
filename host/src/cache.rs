//! The per-user result cache. Being written; until then every call runs uncached.

use serde_json::{Map, Value};
use xprof_plugin_api::ToolError;

use crate::cli::GlobalOpts;
use crate::registry::{Envelope, Registry, ToolEntry};

pub fn cached_call(
    _reg: &Registry,
    _tool: &ToolEntry,
    _args: &Map<String, Value>,
    _opts: &GlobalOpts,
    run: impl FnOnce() -> Result<Envelope, ToolError>,
) -> Result<Envelope, ToolError> {
    run()
}

pub fn command(_args: &[String], _g: &GlobalOpts) -> i32 {
    crate::output::print_error(
        None,
        &ToolError::internal("`xprof cache` is not available in this build yet"),
    )
}
