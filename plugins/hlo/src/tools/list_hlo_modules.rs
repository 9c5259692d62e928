use serde_json::json;
use xprof_capture::{HloModuleRef, HloSource};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{hlo_error, no_hlo, session};

pub struct ListHloModules;
register_tool!(ListHloModules);

impl Tool for ListHloModules {
    fn name(&self) -> &'static str {
        "list_hlo_modules"
    }
    fn summary(&self) -> &'static str {
        "List the HLO modules of a capture"
    }
    fn doc(&self) -> &'static str {
        "List the HLO modules of a run, named `<module>(<program_id>)` as XProf names them: the \
         run directory's *.hlo_proto.pb files plus the modules embedded in each XSpace's \
         /host:metadata plane (JAX captures only have the latter), deduplicated by program id \
         and name, sorted. Nothing is written into the run directory."
    }
    fn params(&self) -> Params {
        Params::new().capture()
    }
    fn output(&self) -> &'static str {
        "{capture, run, count, modules: [name], details: [{name, module_name, program_id, source: {kind, path, metadata_id?}}]}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Modules of the bundled 5-step MLP capture (embedded in the XSpace only)",
                json!({"path": "${FIXTURES}/jax-cpu/logdir", "run": "mlp_steps"}),
            )
            .expect(&["modules", "count"]),
            Example::new(
                "The seed TPU run (one .hlo_proto.pb file)",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["modules"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let s = session(call)?;
        let (mods, read) = xprof_hlo::capture::list_modules(&s).map_err(hlo_error)?;
        for p in &read {
            call.read_file(p);
        }
        if mods.is_empty() {
            return Ok(no_hlo());
        }
        let used: Vec<_> = s.hosts.iter().collect();
        Ok(json!({
            "capture": s.capture_block(&used, &[]),
            "run": s.run,
            "count": mods.len(),
            "modules": mods.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(),
            "details": mods.iter().map(details).collect::<Vec<_>>(),
        })
        .into())
    }
}

/// One module as `details` lists it (the program id a string: it is a 64-bit id).
fn details(m: &HloModuleRef) -> serde_json::Value {
    let source = match &m.source {
        HloSource::File(path) => json!({"kind": "file", "path": path}),
        HloSource::Embedded {
            xspace,
            metadata_id,
        } => json!({"kind": "x_space", "path": xspace, "metadata_id": metadata_id}),
    };
    json!({
        "name": m.name,
        "module_name": m.module_name,
        "program_id": m.program_id.map(|p| p.to_string()),
        "source": source,
    })
}
