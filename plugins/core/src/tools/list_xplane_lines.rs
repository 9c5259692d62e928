use serde_json::{Map, Value, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use super::list_xplane_events::one_host;
use crate::common::with_capture;

pub struct ListXplaneLines;
register_tool!(ListXplaneLines);

impl Tool for ListXplaneLines {
    fn name(&self) -> &'static str {
        "list_xplane_lines"
    }
    fn aliases(&self) -> &'static [&'static str] {
        &["inspect_capture"]
    }
    fn summary(&self) -> &'static str {
        "Plane/line inventory of a capture and what it can be analysed for"
    }
    fn doc(&self) -> &'static str {
        "Every plane of one host's XSpace with its lines and event counts, plus gate flags: \
         device analysis (a device plane with XLA Ops events, or host events carrying hlo_op on \
         CPU), LLO analysis (TC Overlay events), counter sampling (`_counters_` events), steps \
         (a Steps line or host `_r` roots), embedded HLO (`/host:metadata`)."
    }
    fn params(&self) -> Params {
        Params::new().capture().host()
    }
    fn output(&self) -> &'static str {
        "{capture, run, hostname, planes: [{name, id, lines: [{name, id, event_count}], total_events}], capture_valid_for_*}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Inventory of the shared TPU capture",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["planes", "capture_valid_for_device_analysis"]),
            Example::new(
                "Inventory of the bundled CPU capture",
                json!({"path": "${FIXTURES}/jax-cpu/logdir", "run": "matmul"}),
            )
            .expect(&["planes"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let (s, idx, space) = one_host(call)?;
        let mut device = false;
        let mut host_ops = false;
        let mut llo = false;
        let mut counters = false;
        let mut steps = false;
        let mut hlo = false;
        let planes: Vec<Value> = space
            .planes()
            .map(|p| {
                let root_id = p.stat_id("_r");
                let hlo_op_id = p.stat_id("hlo_op");
                if p.name() == "/host:metadata" {
                    hlo = p.event_metadata_iter().any(|m| m.stat("Hlo Proto").is_some());
                }
                let is_dev = p.name().starts_with("/device:TPU:") || p.name().starts_with("/device:GPU:");
                let lines: Vec<Value> = p
                    .lines()
                    .map(|l| {
                        let n = l.num_events();
                        if is_dev && (l.name() == "XLA Ops" || p.name().starts_with("/device:GPU:")) && n > 0 {
                            device = true;
                        }
                        match l.name() {
                            "TC Overlay" if n > 0 => llo = true,
                            "_counters_" if n > 0 => counters = true,
                            "Steps" if n > 0 => steps = true,
                            _ => {}
                        }
                        // Look for `_r` / `hlo_op` only while the answer is still unknown:
                        // once both flags are set no event can change them.
                        for e in l.events() {
                            let want_root = root_id.filter(|_| !steps);
                            let want_hlo = hlo_op_id.filter(|_| !host_ops);
                            if want_root.is_none() && want_hlo.is_none() {
                                break;
                            }
                            if let Some(r) = want_root
                                && e.stat_by_id(r).is_some()
                            {
                                steps = true;
                            }
                            if let Some(h) = want_hlo
                                && e.stat_by_id(h).is_some()
                            {
                                host_ops = true;
                            }
                        }
                        json!({"name": l.name(), "id": l.id().to_string(), "event_count": n})
                    })
                    .collect();
                json!({"name": p.name(), "id": p.id().to_string(), "lines": lines, "total_events": p.num_events()})
            })
            .collect();
        let mut body = Map::new();
        body.insert("session_id".into(), json!(s.dir.display().to_string()));
        body.insert("hostname".into(), json!(space.hostname()));
        body.insert("planes".into(), Value::Array(planes));
        body.insert("capture_valid_for_device_analysis".into(), json!(device));
        body.insert(
            "capture_valid_for_host_executed_op_analysis".into(),
            json!(host_ops),
        );
        body.insert("capture_valid_for_llo_analysis".into(), json!(llo));
        body.insert("capture_valid_for_counter_sampling".into(), json!(counters));
        body.insert("capture_has_step_markers".into(), json!(steps));
        body.insert("capture_has_embedded_hlo".into(), json!(hlo));
        body.insert("errors".into(), json!(space.errors()));
        body.insert("reader_diagnostics".into(), json!(space.diagnostics()));
        body.insert("warnings".into(), json!(space.warnings()));
        Ok(with_capture(&s, &[&s.hosts[idx]], &[], body).into())
    }
}
