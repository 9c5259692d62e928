//! The HLO graph DB against XProf's official CLI `query_hlo_graph` on jit_train_step(8).

use serde_json::{Value, json};
use xprof_hlo::print::ModuleView;
use xprof_hlo::query::{GraphDb, SqlLimits};
use xprof_plugin_api::sdk::testing::corpus;

fn oracle(c: &std::path::Path, f: &str) -> Value {
    let p = c
        .join("oracle/official-cli-2.24.2/jax-cpu-mlp_train")
        .join(f);
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn train_step_tables_match_official_cli() {
    let Some(c) = corpus(env!("CARGO_MANIFEST_DIR")) else {
        return;
    };
    let bytes = std::fs::read(
        c.join("fixtures/jax-cpu/logdir/plugins/profile/mlp_train/jit_train_step(8).hlo_proto.pb"),
    )
    .unwrap();
    let m = xprof_proto::decode_hlo_proto(&bytes)
        .unwrap()
        .hlo_module
        .unwrap();
    let view = ModuleView::new(&m);
    let db = GraphDb::build(&view, "jit_train_step(8)");

    let want = oracle(&c, "query_hlo_graph.json");
    let got = db.summary();
    for k in [
        "entry_computation",
        "computation_count",
        "instruction_count",
        "edge_count",
        "fusion_count",
        "custom_call_count",
        "fusion_blocker_count",
        "top_opcodes",
    ] {
        assert_eq!(got[k], want[k], "summary.{k}");
    }
    assert_eq!(
        Value::Array(db.opcode_stats()),
        oracle(&c, "query_hlo_graph.opcode_stats.json")["rows"]
    );

    // Every row XProf's search returned: ids, counts, costs and the expression.
    let want = oracle(&c, "query_hlo_graph.search.json");
    for w in want["rows"].as_array().unwrap() {
        let i = db.find(w["name"].as_str().unwrap()).unwrap();
        assert_eq!(db.search_row(&db.instructions[i]), *w);
    }

    let want = oracle(&c, "query_hlo_graph.call_tree.json");
    let got: Vec<Value> = db
        .call_edges
        .iter()
        .map(|e| json!({"caller_comp_name": e.caller_comp_name, "caller_instruction": e.caller_instruction,
                       "caller_opcode": e.caller_opcode, "callee_comp_name": e.callee_comp_name,
                       "callee_instruction_count": e.callee_instruction_count}))
        .collect();
    assert_eq!(Value::Array(got), want["call_edges"]);

    let want = oracle(&c, "query_hlo_graph.shortest_path.json");
    let (dir, path) = db
        .shortest_path(
            db.find("ynn_fusion.6").unwrap(),
            db.find("tuple.3").unwrap(),
        )
        .unwrap();
    assert_eq!(dir, want["direction"]);
    let names: Vec<&str> = path
        .iter()
        .map(|(i, _)| db.instructions[*i].name.as_str())
        .collect();
    let want_names: Vec<&str> = want["path"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, want_names);

    let want = oracle(&c, "query_hlo_graph.sql.json");
    let (rows, truncated) = db
        .sql("SELECT opcode, COUNT(*) AS n, SUM(flops) AS flops FROM instructions GROUP BY opcode ORDER BY n DESC, opcode", 0, SqlLimits::default())
        .unwrap();
    assert!(!truncated);
    let counts = |v: &[Value]| {
        v.iter()
            .map(|r| (r["opcode"].clone(), r["n"].clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(counts(&rows), counts(want["rows"].as_array().unwrap()));
}

#[test]
fn sql_is_read_only() {
    let Some(c) = corpus(env!("CARGO_MANIFEST_DIR")) else {
        return;
    };
    let bytes = std::fs::read(
        c.join("fixtures/jax-cpu/logdir/plugins/profile/matmul/jit_matmul(0).hlo_proto.pb"),
    )
    .unwrap();
    let m = xprof_proto::decode_hlo_proto(&bytes)
        .unwrap()
        .hlo_module
        .unwrap();
    let db = GraphDb::build(&ModuleView::new(&m), "jit_matmul(0)");
    for q in [
        "DELETE FROM instructions",
        "SELECT 1; DROP TABLE edges",
        "WITH x AS (SELECT 1) DELETE FROM edges",
        "ATTACH DATABASE '/tmp/x.db' AS x",
        "/* hi */ INSERT INTO edges VALUES (1,2,3)",
    ] {
        let e = db.sql(q, 0, SqlLimits::default()).unwrap_err();
        assert_eq!(e.kind(), "invalid_value", "{q}");
    }
    let (rows, _) = db
        .sql(
            "-- count\nSELECT COUNT(*) AS n FROM edges",
            0,
            SqlLimits::default(),
        )
        .unwrap();
    assert_eq!(rows[0]["n"], 4);
    let (rows, truncated) = db
        .sql(
            "SELECT name FROM instructions ORDER BY id",
            2,
            SqlLimits::default(),
        )
        .unwrap();
    assert_eq!((rows.len(), truncated), (2, true));
    assert_eq!(rows[0]["name"], "x.1");
}
