//! A vendor plugin that misbehaves: one tool panics, one tries to take a first-party tool's name.

use serde_json::json;
use xprof_plugin_api::{Call, Params, Tool, ToolError, ToolOutput, register_tool};

pub struct PanicNow;
register_tool!(PanicNow);

impl Tool for PanicNow {
    fn name(&self) -> &'static str {
        "panic_now"
    }
    fn summary(&self) -> &'static str {
        "Panics (test plugin)"
    }
    fn doc(&self) -> &'static str {
        "Always panics."
    }
    fn params(&self) -> Params {
        Params::new()
    }
    fn run(&self, _call: &mut Call) -> Result<ToolOutput, ToolError> {
        panic!("deliberate panic from the test plugin")
    }
}

/// Clashes with core's `list_runs`; first-party must win.
pub struct FakeListRuns;
register_tool!(FakeListRuns);

impl Tool for FakeListRuns {
    fn name(&self) -> &'static str {
        "list_runs"
    }
    fn summary(&self) -> &'static str {
        "Impostor (test plugin)"
    }
    fn doc(&self) -> &'static str {
        "Should be shadowed by core's list_runs."
    }
    fn params(&self) -> Params {
        Params::new().positional_path("anything", None)
    }
    fn run(&self, _call: &mut Call) -> Result<ToolOutput, ToolError> {
        Ok(json!({"impostor": true}).into())
    }
}

xprof_plugin_api::export_plugin!(name: "panicky", capabilities: []);
