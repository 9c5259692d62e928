use serde_json::{Map, json};
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{session, with_capture};

pub struct GetOpProfile;
register_tool!(GetOpProfile);

impl Tool for GetOpProfile {
    fn name(&self) -> &'static str {
        "get_op_profile"
    }
    fn aliases(&self) -> &'static [&'static str] {
        &["get_hlo_op_profile"]
    }
    fn summary(&self) -> &'static str {
        "Op profile tree by program or by category (XProf op_profile)"
    }
    fn doc(&self) -> &'static str {
        "XProf's op_profile: a tree root → program → category → op (or root → category → op \
         with --group_by category), each node with rawTime (ps), self time, FLOPs, HBM bytes, \
         occurrences and utilisation fractions; IDLE is a root child unless --include_idle false. \
         On CPU-only captures the tree holds the host-executed XLA ops (`host_executed`)."
    }
    fn params(&self) -> Params {
        Params::new()
            .capture()
            .host()
            .string_enum(
                "group_by",
                "Tree grouping.",
                &["program", "category"],
                "program",
            )
            .boolean(
                "include_idle",
                "Include the IDLE node (time the device ran no op).",
                true,
            )
    }
    fn output(&self) -> &'static str {
        "{capture, run, device_type, group_by, total_time_ps, idle_time_ps, idle_percent, profile}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Op profile by program of the shared TPU v6e capture",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["profile", "total_time_ps"]),
            Example::new(
                "By category, without idle, on the bundled CPU capture",
                json!({"path": "${FIXTURES}/jax-cpu/logdir", "run": "mlp_steps", "group_by": "category", "include_idle": false}),
            )
            .expect(&["profile"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let group_by = call.str_or("group_by", "program")?;
        let include_idle = call.bool_or("include_idle", true)?;
        let s = session(call)?;
        let (st, used, warnings) =
            crate::common::op_stats_with(call, &s, xprof_opstats::BuildOptions::OP_DATABASES)?;
        let Some((db, host_executed)) = xprof_opstats::views::op_db(&st) else {
            return Ok(crate::common::no_op_data(call, &s, &st));
        };
        let idle = db.idle_op_time_ps();
        let mut body = Map::new();
        body.insert("device_type".into(), json!(st.run_env.device_type));
        body.insert("host_executed".into(), json!(host_executed));
        body.insert("group_by".into(), json!(group_by));
        body.insert("total_time_ps".into(), json!(db.total_time_ps));
        body.insert("idle_time_ps".into(), json!(idle));
        body.insert(
            "idle_percent".into(),
            json!(100.0 * xprof_opstats::metrics::safe_div(idle as f64, db.total_time_ps as f64)),
        );
        body.insert(
            "profile".into(),
            xprof_opstats::views::op_profile(&st, &group_by, include_idle),
        );
        Ok(with_capture(&s, &used, &warnings, body).into())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};
    use xprof_plugin_api::sdk::{invoke_json, testing};

    /// Every node below `v`, itself included.
    fn nodes<'a>(v: &'a Value, out: &mut Vec<&'a Value>) {
        out.push(v);
        for c in v["children"].as_array().into_iter().flatten() {
            nodes(c, out);
        }
    }

    /// Regression: on a CPU capture the host-executed ops' FLOPs, bytes and utilizations read
    /// 0 although the trace has no cost for them at all.
    #[test]
    fn host_executed_ops_have_unknown_costs_not_zero() {
        let logdir =
            testing::workspace_root(env!("CARGO_MANIFEST_DIR")).join("fixtures/jax-cpu/logdir");
        let args = json!({"path": logdir.display().to_string(), "run": "mlp_steps"});
        let r = invoke_json(
            env!("CARGO_CRATE_NAME"),
            "get_op_profile",
            &args.to_string(),
            "{}",
        )
        .map(|env| env["result"].clone())
        .unwrap();
        assert_eq!(r["host_executed"], json!(true));
        let mut all = Vec::new();
        nodes(&r["profile"], &mut all);
        let (idle, ops): (Vec<&Value>, Vec<&Value>) =
            all.into_iter().partition(|n| n["name"] == "IDLE");
        assert_eq!(idle.len(), 1);
        assert!(ops.len() > 3, "{}", ops.len());
        for n in ops {
            let m = &n["metrics"];
            for key in [
                "rawFlops",
                "bf16Flops",
                "flops",
                "rawBytesAccessedArray",
                "bandwidthUtils",
            ] {
                assert_eq!(m[key], Value::Null, "{}: {key}", n["name"]);
                let reason = m[format!("{key}_reason")].as_str().unwrap_or_default();
                assert!(
                    reason.contains("host CPU threads"),
                    "{}: {reason}",
                    n["name"]
                );
            }
            assert!(m["rawTime"].as_u64().is_some(), "{}", n["name"]);
        }
        // IDLE does no work: its zero is a measurement.
        assert_eq!(idle[0]["metrics"]["rawFlops"], json!(0));
    }
}
