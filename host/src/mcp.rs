//! `xprof mcp`: the registry served over MCP (stdio, streamable HTTP). Being written.

use crate::cli::GlobalOpts;
use crate::registry::Registry;
use xprof_plugin_api::ToolError;

pub fn run(_reg: Registry, _args: &[String], _g: &GlobalOpts) -> i32 {
    crate::output::print_error(
        None,
        &ToolError::internal("`xprof mcp` is not available in this build yet"),
    )
}
