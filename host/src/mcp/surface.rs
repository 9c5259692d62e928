//! What `xprof mcp` shows a client (issue 33): which tools (`--tools SET,...`, `--plugin NAME`),
//! how each is described (one line; the detail is one `describe_tool` call away), its
//! annotations, and the prompts for the common questions.
//!
//! Clients keep every listed tool's name, description and schema in the model's context on
//! every turn, and some warn past ~40 tools, so the default set is the triage tools; `--tools
//! all` lists every plugin's.

use std::collections::BTreeSet;
use std::sync::Arc;

use rmcp::model::{
    GetPromptResult, JsonObject, Prompt, PromptArgument, PromptMessage, Role, Tool, ToolAnnotations,
};
use serde_json::{Value, json};
use xprof_plugin_api::ToolError;

use crate::registry::{Registry, ToolEntry};

/// The set served when `--tools` is not given.
pub const DEFAULT_SET: &str = "triage";

/// The tools that answer "why is it slow, why does it run out of memory, what changed",
/// with what an agent needs to find its way (runs, hosts, the HLO around an op).
pub const TRIAGE: &[&str] = &[
    "diagnose",
    "list_runs",
    "get_hosts",
    "get_overview",
    "get_step_trace",
    "get_top_hlo_ops",
    "get_op_profile",
    "get_input_pipeline",
    "check_host_boundness",
    "get_roofline_model",
    "get_kernel_stats",
    "analyze_async_overlap",
    "get_memory_profile",
    "get_peak_allocations",
    "get_smart_suggestions",
    "diff_sessions",
    "list_hlo_modules",
    "get_hlo_neighborhood",
];

/// The plugin whose tools are listed only when asked for by name or with `all`.
pub const EXAMPLE_PLUGIN: &str = "example-vendor";

/// The host's own tool: the full description of any tool.
pub const DESCRIBE_TOOL: &str = "describe_tool";

/// Which tools a server lists and serves.
#[derive(Clone, Debug)]
pub struct Selection {
    /// Set names as given (`triage`, `all`, or a plugin's name).
    pub sets: Vec<String>,
    /// Plugins added whole with `--plugin`.
    pub plugins: Vec<String>,
}

impl Default for Selection {
    fn default() -> Self {
        Selection {
            sets: vec![DEFAULT_SET.to_string()],
            plugins: Vec::new(),
        }
    }
}

impl Selection {
    /// The names of the selected tools, checking every set and plugin name against `reg`.
    pub fn resolve(&self, reg: &Registry) -> Result<BTreeSet<String>, ToolError> {
        let plugin_names: Vec<&str> = reg.plugins.iter().map(|p| p.name.as_str()).collect();
        let known = || {
            format!(
                "sets: triage, all, or a plugin: {}",
                plugin_names.join(", ")
            )
        };
        let mut wanted_plugins: Vec<&str> = Vec::new();
        let mut out = BTreeSet::new();
        for set in &self.sets {
            match set.as_str() {
                "triage" => out.extend(
                    TRIAGE
                        .iter()
                        .filter(|t| reg.tools.contains_key(**t))
                        .map(|t| t.to_string()),
                ),
                "all" => wanted_plugins.extend(plugin_names.iter().copied()),
                p if plugin_names.contains(&p) => wanted_plugins.push(p),
                other => {
                    return Err(
                        ToolError::usage(format!("--tools {other}: no such tool set"))
                            .with_hint(known()),
                    );
                }
            }
        }
        for p in &self.plugins {
            if !plugin_names.contains(&p.as_str()) {
                return Err(
                    ToolError::usage(format!("--plugin {p}: no such plugin loaded"))
                        .with_hint(format!("loaded plugins: {}", plugin_names.join(", "))),
                );
            }
            wanted_plugins.push(p);
        }
        for t in reg.tools.values() {
            if wanted_plugins.contains(&reg.plugins[t.plugin].name.as_str()) {
                out.insert(t.name.clone());
            }
        }
        Ok(out)
    }

    /// How the set is named in messages (`--tools triage`).
    pub fn describe(&self) -> String {
        let mut s = format!("--tools {}", self.sets.join(","));
        for p in &self.plugins {
            s.push_str(&format!(" --plugin {p}"));
        }
        s
    }
}

/// Parse `--tools a,b`.
pub fn parse_sets(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// The listed form of a tool: one line of description, the schema, annotations.
pub fn listed_tool(t: &ToolEntry, schema: JsonObject) -> Tool {
    let description = format!(
        "{} (arguments' details, output and examples: {DESCRIBE_TOOL})",
        t.summary.trim_end_matches('.')
    );
    Tool::new(t.name.clone(), description, Arc::new(schema)).annotate(annotations(t))
}

/// Every tool reads captures and changes nothing, except that a tool with `output_path`
/// writes the file it is given (or one in `$TMPDIR`): additive, never destructive.
pub fn annotations(t: &ToolEntry) -> ToolAnnotations {
    let writes = t.properties().contains_key("output_path");
    ToolAnnotations::from_raw(None, Some(!writes), Some(false), Some(true), Some(false))
}

/// `describe_tool` as listed.
pub fn describe_tool_listing() -> Tool {
    let schema = json!({
        "type": "object",
        "properties": {"name": {"type": "string", "description": "The tool to describe"}},
        "required": ["name"],
        "additionalProperties": false,
    });
    let Value::Object(schema) = schema else {
        unreachable!("an object literal")
    };
    Tool::new(
        DESCRIBE_TOOL,
        "The full description of an xprof tool: what it computes, its arguments, its output \
         and examples (also of tools this server does not list)",
        Arc::new(schema),
    )
    .annotate(ToolAnnotations::from_raw(
        None,
        Some(true),
        Some(false),
        Some(true),
        Some(false),
    ))
}

/// The answer of `describe_tool`.
pub fn describe(
    reg: &Registry,
    exposed: &BTreeSet<String>,
    selection: &Selection,
    name: &str,
) -> Result<Value, ToolError> {
    let t = reg.find(name).ok_or_else(|| {
        ToolError::invalid(format!("{DESCRIBE_TOOL}: no tool named `{name}`"))
            .with_hint("tools/list lists this server's tools; `xprof tools` lists all")
    })?;
    let listed = exposed.contains(&t.name);
    let mut v = json!({
        "name": t.name,
        "plugin": reg.plugins[t.plugin].name,
        "description": super::description(t),
        "input_schema": super::client_schema(&t.params),
        "listed_by_this_server": listed,
    });
    if !listed {
        v["how_to_list"] = json!(format!(
            "this server runs with {}; start it with `xprof mcp --tools all` (or `--plugin {}`)",
            selection.describe(),
            reg.plugins[t.plugin].name
        ));
    }
    Ok(v)
}

/// The prompts: the common questions, each a workflow over the triage tools.
pub fn prompts() -> Vec<Prompt> {
    let path = || {
        PromptArgument::new("path")
            .with_description("The capture: a logdir, a run directory or one .xplane.pb")
            .with_required(true)
    };
    vec![
        Prompt::new(
            "why_is_it_slow",
            Some("Find what limits a captured program's speed and what to change first"),
            Some(vec![path()]),
        ),
        Prompt::new(
            "why_out_of_memory",
            Some("Find what fills device memory at the peak and how to lower it"),
            Some(vec![path()]),
        ),
        Prompt::new(
            "what_changed",
            Some("Compare two captures: which ops and steps got slower or faster"),
            Some(vec![
                PromptArgument::new("baseline")
                    .with_description("The capture before the change")
                    .with_required(true),
                PromptArgument::new("optimized")
                    .with_description("The capture after the change")
                    .with_required(true),
            ]),
        ),
    ]
}

/// The text of a prompt for `args`.
pub fn prompt(name: &str, args: &JsonObject) -> Result<GetPromptResult, ToolError> {
    let arg = |k: &str| -> Result<String, ToolError> {
        args.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .ok_or_else(|| {
                ToolError::usage(format!("prompt {name}: argument `{k}` is required"))
                    .with_hint("prompts/list gives each prompt's arguments")
            })
    };
    let text = match name {
        "why_is_it_slow" => {
            let p = arg("path")?;
            format!(
                "Find why the program captured at {p} is slow and what to change first.\n\
                 0. diagnose path={p}: the bottleneck, its evidence and the three changes that can \
                 save the most, each with the next call; then confirm with the tools below.\n\
                 1. get_overview path={p}: step time, duty cycle, idle time and where device time goes.\n\
                 2. get_top_hlo_ops path={p}: the ops that take the time; get_roofline_model for \
                 whether each is compute- or memory-bound.\n\
                 3. If the device waits on the host: get_input_pipeline and check_host_boundness.\n\
                 4. On TPU with collectives or copies: analyze_async_overlap.\n\
                 5. get_smart_suggestions path={p} for rules with their numbers.\n\
                 Answer with the bottleneck, the evidence (ms, %, op names) and the three changes \
                 that save the most time, largest first. Quote numbers from the tools; say \
                 \"no data\" where a tool has none, never 0 %."
            )
        }
        "why_out_of_memory" => {
            let p = arg("path")?;
            format!(
                "Find what fills device memory at the peak of the program captured at {p}.\n\
                 1. get_memory_profile path={p}: the peak, when it happens, heap vs stack, \
                 fragmentation.\n\
                 2. get_peak_allocations path={p}: each module's total and the buffers live at \
                 its peak, largest first.\n\
                 3. For the largest buffers, get_hlo_neighborhood on the instruction that \
                 defines them.\n\
                 Answer with the peak (GiB and % of capacity), the buffers that make it up, and \
                 the changes (rematerialisation, sharding, smaller batch, donation) that lower \
                 it most, with the bytes each saves."
            )
        }
        "what_changed" => {
            let (b, o) = (arg("baseline")?, arg("optimized")?);
            format!(
                "Compare the capture {b} (before) with {o} (after).\n\
                 1. diff_sessions baseline_session_id={b} optimized_session_id={o}: step time and \
                 the ops that account for the change.\n\
                 2. get_overview on each for duty cycle and idle time.\n\
                 Answer with the step-time change (ms and %), the ops that explain it, and \
                 whether the change is real or within step-to-step noise."
            )
        }
        other => {
            return Err(ToolError::usage(format!("no prompt named `{other}`"))
                .with_hint("prompts/list lists the prompts"));
        }
    };
    Ok(
        GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
            .with_description(format!("xprof: {name}")),
    )
}
