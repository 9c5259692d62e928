//! `xprof skills install`: an agent skill (SKILL.md and references) generated from the
//! registry, so it names exactly the tools this build has, written where a client reads it.
//!
//! - `--client claude`: `~/.claude/skills/xprof/` (Claude Code's user skills);
//! - `--client codex`: `~/.codex/skills/xprof/`;
//! - `--client gemini`: a Gemini CLI extension, `~/.gemini/extensions/xprof/`, whose
//!   `gemini-extension.json` names SKILL.md as its context file and registers `xprof mcp`;
//! - `--client cursor`: `.cursor/rules/xprof.mdc` in the working directory (a project rule);
//! - `--dir D`: `D/xprof/` (any client; `--dir` wins over the client's default place).
//!
//! Files are written beside their destination and renamed into place, so a reader never sees
//! half a skill; stdout gets `{"status": "written", "files": [...]}`.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use xprof_plugin_api::ToolError;

use crate::registry::Registry;

pub const CLIENTS: &[&str] = &["claude", "codex", "gemini", "cursor"];

const DESCRIPTION: &str = "Find why a TPU/GPU/CPU program captured with XProf (JAX, PyTorch/XLA, \
TensorFlow) is slow or runs out of memory, with numbers to act on: run the xprof CLI (or its MCP \
server) on a logdir, a run directory or an .xplane.pb, HLO dump folders and TPU LLO/Mosaic dumps.";

/// The workflow and the rules, then the question → tool table.
fn skill_body(reg: &Registry) -> String {
    let mut s = String::new();
    s.push_str(
        "# xprof\n\n\
         `xprof` answers questions about profiler captures as JSON. `PATH` is a logdir (its \
         newest run), a run directory (`<logdir>/plugins/profile/<run>`) or one `.xplane.pb`; \
         `--logdir L --run R` also works.\n\n\
         ## Rules\n\n\
         - Start with `xprof diagnose PATH`: the bottleneck with its evidence and the three \
         changes that can save the most time, each with the next command to run. Follow `next`.\n\
         - Every answer fits 16 KB by default: lists keep their first (largest) rows and the \
         answer says `\"truncated\": true` with a `truncation` object naming the flag that gets \
         the rest (`--full`, `--limit`, `--offset`). Do not ask for `--full` unless you need \
         rows that were cut.\n\
         - `{\"status\": \"no_data\", \"reason\", \"capture_flags\"}` means the capture lacks \
         that data; it is not 0 %. A field that is `null` has a `<field>_reason` beside it.\n\
         - Quote numbers from the answers (ms, %, op names); never estimate what a tool \
         measured. Errors are one JSON object on stderr with a `hint`; exit codes 2 usage, \
         3 path, 4 invalid value.\n\
         - `xprof <tool> --help` gives a tool's arguments, output and examples.\n\n\
         ## Workflows\n\n\
         **Slow.** `xprof diagnose PATH` → `xprof get_overview PATH` (step time, duty cycle, \
         idle) → `xprof get_top_hlo_ops PATH` (where the time goes) → `xprof \
         get_roofline_model PATH` (compute- or memory-bound) → `xprof get_input_pipeline PATH` \
         / `xprof check_host_boundness PATH` when the device waits → `xprof \
         analyze_async_overlap PATH` for exposed collectives and copies → `xprof \
         get_hlo_neighborhood PATH --instruction_name OP` around the op to change.\n\n\
         **Out of memory.** `xprof get_memory_profile PATH` (peak, when, fragmentation) → `xprof \
         get_peak_allocations PATH` (buffers live at each module's peak, largest first) → \
         `xprof get_memory_viewer PATH` for one module's buffer assignment.\n\n\
         **What changed.** `xprof diff_sessions --logdir L --baseline_session_id A \
         --optimized_session_id B`.\n\n\
         **TPU kernels (Pallas/Mosaic).** `xprof check_kernel_profiling PATH` first, then \
         `xprof list_kernel_invocations PATH`, `xprof get_kernel_stage_breakdown PATH`, and \
         with an LLO dump `xprof list_llo_programs --dump_dir D`, `xprof get_llo_fit_summary \
         --dump_dir D`.\n\n\
         **For a person.** `xprof report PATH -o report.html` (charts), `xprof export_trace \
         PATH -o trace.json.gz` (open in ui.perfetto.dev).\n\n\
         ## Capturing a profile\n\n\
         - JAX: `jax.profiler.trace(logdir)` around a few steps, each step in \
         `jax.profiler.StepTraceAnnotation(\"train\", step_num=i)`.\n\
         - PyTorch/XLA: `xp.start_server(9012)` and `xp.trace_detached(\"localhost:9012\", \
         logdir)`, steps in `xp.StepTrace(\"train\", step_num=i)`.\n\
         - TensorFlow: `tf.profiler.experimental.start(logdir)` / `stop()`, steps in \
         `tf.profiler.experimental.Trace(\"train\", step_num=i, _r=1)`.\n\
         - HLO dumps: `XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_as_text`; then `xprof \
         list_hlo_dump_modules --dump_dir DIR`.\n\
         - Profile several whole steps after warm-up (the first steps compile).\n\n\
         ## Tools\n\n\
         | question | command |\n| --- | --- |\n",
    );
    for t in reg.tools.values() {
        s.push_str(&format!(
            "| {} | `xprof {}` |\n",
            t.summary.replace('|', "/"),
            t.name
        ));
    }
    s.push_str(
        "\nEvery tool's arguments, output and examples: [references/tools.md](references/tools.md).\n",
    );
    s
}

/// references/tools.md: each tool's documentation and example command lines.
fn tools_reference(reg: &Registry) -> String {
    let mut s = String::from("# xprof tools\n");
    for t in reg.tools.values() {
        s.push_str(&format!("\n## {}\n\n{}\n", t.name, t.summary));
        if !t.doc.is_empty() && t.doc != t.summary {
            s.push_str(&format!("\n{}\n", t.doc));
        }
        let props = t.properties();
        if !props.is_empty() {
            s.push_str("\nArguments: ");
            let args: Vec<String> = props
                .iter()
                .map(|(k, v)| {
                    if v["x-positional"].as_bool().unwrap_or(false) {
                        k.to_uppercase()
                    } else {
                        format!("`--{k}`")
                    }
                })
                .collect();
            s.push_str(&args.join(", "));
            s.push('\n');
        }
        if !t.output.is_empty() {
            s.push_str(&format!("\nOutput: `{}`\n", t.output));
        }
        let ex = crate::cli::example_lines(t);
        if !ex.is_empty() {
            s.push_str("\n```sh\n");
            for line in ex {
                s.push_str(line.trim_start());
                s.push('\n');
            }
            s.push_str("```\n");
        }
    }
    s
}

fn frontmatter(extra: &str) -> String {
    format!("---\nname: xprof\ndescription: >-\n  {DESCRIPTION}\n{extra}---\n\n")
}

fn home() -> Result<PathBuf, ToolError> {
    crate::files::home().ok_or_else(|| {
        ToolError::path("HOME is not set: cannot find the client's skills folder")
            .with_hint("pass --dir DIR")
    })
}

fn write(path: &Path, text: &str) -> Result<(), ToolError> {
    crate::files::write_atomically(path, text).map_err(|e| {
        ToolError::path(format!("{}: {e}", path.display()))
            .with_hint("pass --dir DIR with a writable directory")
    })
}

/// The files of the skill for `client` (or the generic layout) under `root`.
fn files(reg: &Registry, client: Option<&str>, root: &Path) -> Vec<(PathBuf, String)> {
    let body = skill_body(reg);
    let tools = tools_reference(reg);
    match client {
        Some("cursor") => vec![
            (
                root.join("xprof.mdc"),
                format!("---\ndescription: {DESCRIPTION}\nalwaysApply: false\n---\n\n{body}"),
            ),
            (root.join("xprof-tools.md"), tools),
        ],
        Some("gemini") => {
            let manifest = json!({
                "name": "xprof",
                "version": crate::VERSION,
                "contextFileName": "SKILL.md",
                "mcpServers": {"xprof": {"command": "xprof", "args": ["mcp"]}},
            });
            vec![
                (root.join("SKILL.md"), frontmatter("") + &body),
                (root.join("references/tools.md"), tools),
                (
                    root.join("gemini-extension.json"),
                    serde_json::to_string_pretty(&manifest).unwrap_or_default() + "\n",
                ),
            ]
        }
        _ => vec![
            (root.join("SKILL.md"), frontmatter("") + &body),
            (root.join("references/tools.md"), tools),
        ],
    }
}

/// `xprof skills install [--client C] [--dir D]`.
pub fn command(reg: &Registry, args: &[String]) -> Result<Value, ToolError> {
    let usage = |m: String| {
        ToolError::usage(m).with_hint(format!(
            "xprof skills install [--client {}] [--dir DIR]",
            CLIENTS.join("|")
        ))
    };
    let mut it = args.iter();
    match it.next().map(String::as_str) {
        Some("install") => {}
        Some(other) => return Err(usage(format!("skills: unknown command `{other}`"))),
        None => return Err(usage("skills: missing command".into())),
    }
    let (mut client, mut dir) = (None, None);
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) => (f, Some(v.to_string())),
            None => (a.as_str(), None),
        };
        let value = inline
            .or_else(|| it.next().cloned())
            .filter(|v| !v.is_empty())
            .ok_or_else(|| usage(format!("{flag} needs a value")))?;
        match flag {
            "--client" if CLIENTS.contains(&value.as_str()) => client = Some(value),
            "--client" => return Err(usage(format!("--client {value}: unknown client"))),
            "--dir" => dir = Some(PathBuf::from(value)),
            other => return Err(usage(format!("skills install: unknown argument `{other}`"))),
        }
    }
    let root = match (&dir, client.as_deref()) {
        (Some(d), _) => d.join("xprof"),
        (None, Some("claude")) => home()?.join(".claude/skills/xprof"),
        (None, Some("codex")) => home()?.join(".codex/skills/xprof"),
        (None, Some("gemini")) => home()?.join(".gemini/extensions/xprof"),
        (None, Some(_)) => PathBuf::from(".cursor/rules"),
        (None, None) => {
            return Err(usage("skills install: say where: --client or --dir".into()));
        }
    };
    let mut written = Vec::new();
    for (path, text) in files(reg, client.as_deref(), &root) {
        write(&path, &text)?;
        written.push(json!({"path": path.display().to_string(), "bytes": text.len()}));
    }
    Ok(json!({"status": "written", "client": client, "files": written}))
}
