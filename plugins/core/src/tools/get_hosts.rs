use serde_json::json;
use xprof_plugin_api::{Call, Example, Params, Tool, ToolError, ToolOutput, register_tool};

use crate::common::{session, with_capture};

pub struct GetHosts;
register_tool!(GetHosts);

impl Tool for GetHosts {
    fn name(&self) -> &'static str {
        "get_hosts"
    }
    fn summary(&self) -> &'static str {
        "List the hosts (XSpace files) of a run"
    }
    fn doc(&self) -> &'static str {
        "List the hosts of a run: the stems of its <host>.xplane.pb files, sorted. Pass one of \
         them as --host to tools that read a single host."
    }
    fn params(&self) -> Params {
        Params::new().capture()
    }
    fn output(&self) -> &'static str {
        "{capture, run, hosts: [{hostname, file}]}"
    }
    fn examples(&self) -> Vec<Example> {
        vec![
            Example::new(
                "Hosts of the bundled matmul capture",
                json!({"path": "${FIXTURES}/jax-cpu/logdir", "run": "matmul"}),
            )
            .expect(&["hosts"]),
            Example::new(
                "Hosts of the shared TPU v6e capture",
                json!({"path": "${CORPUS}/fixtures/seed-v6e/logdir"}),
            )
            .expect(&["hosts", "run"]),
        ]
    }
    fn run(&self, call: &mut Call) -> Result<ToolOutput, ToolError> {
        let s = session(call)?;
        let used: Vec<_> = s.hosts.iter().collect();
        let mut body = serde_json::Map::new();
        body.insert(
            "hosts".into(),
            s.hosts
                .iter()
                .map(|h| json!({"hostname": h.name, "file": h.path.display().to_string()}))
                .collect(),
        );
        Ok(with_capture(&s, &used, &[], body).into())
    }
}
