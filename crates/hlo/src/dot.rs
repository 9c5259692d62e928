//! Graphviz DOT for a computation or an instruction's neighborhood, with stable node ids
//! (`n<k>` in (distance, name) or printed order, never addresses) and XProf's graph-viewer
//! colour classes per opcode.

use std::collections::HashMap;
use std::fmt::Write as _;

use crate::graph::{Direction, Graph, Loc};
use crate::text::Instruction;

/// XProf's node colour classes (`GetNodeStyles` in xprof's graph viewer converter).
pub fn opcode_color(opcode: &str) -> &'static str {
    match opcode {
        "async-start" | "async-update" | "async-done" => "#bbdefb",
        "all-gather"
        | "all-gather-start"
        | "all-gather-done"
        | "all-reduce"
        | "reduce-scatter"
        | "all-reduce-start"
        | "all-reduce-done"
        | "all-to-all"
        | "collective-broadcast"
        | "collective-permute"
        | "collective-permute-start"
        | "collective-permute-done"
        | "infeed"
        | "outfeed"
        | "partition-id"
        | "recv"
        | "recv-done"
        | "send"
        | "send-done"
        | "replica-id" => "#d7ccc8",
        "convolution" | "dot" | "fft" | "triangular-solve" | "cholesky" => "#90caf9",
        "call" | "conditional" | "custom-call" | "while" => "#a5d6a7",
        "domain" | "fusion" | "map" | "get-dimension-size" | "set-dimension-size" => "#e0e0e0",
        "concatenate" | "dynamic-slice" | "reshape" | "dynamic-reshape" | "reverse"
        | "transpose" | "copy" | "copy-start" | "copy-done" => "#c8e6c9",
        "parameter" => "#ffe0b2",
        "batch-norm-grad"
        | "batch-norm-inference"
        | "batch-norm-training"
        | "reduce"
        | "reduce-window"
        | "scatter"
        | "select-and-scatter"
        | "gather" => "#e1bee7",
        "broadcast" | "dynamic-update-slice" => "#fff9c4",
        _ => "#ffffff",
    }
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

fn node_line(out: &mut String, id: &str, ins: &Instruction, center: bool) {
    let called = if ins.called_computations.is_empty() {
        String::new()
    } else {
        format!("\\n{}", escape(&ins.called_computations.join(", ")))
    };
    let _ = writeln!(
        out,
        "  {id} [label=\"{}\\n{}{}\\n{}\", fillcolor=\"{}\"{}];",
        escape(&ins.name),
        escape(&ins.opcode),
        called,
        escape(&ins.shape),
        opcode_color(&ins.opcode),
        if center { ", penwidth=3" } else { "" }
    );
}

fn render(graph: &Graph<'_>, title: &str, locs: &[Loc], center: Option<Loc>) -> (String, usize) {
    let ids: HashMap<Loc, String> = locs
        .iter()
        .enumerate()
        .map(|(k, &l)| (l, format!("n{k}")))
        .collect();
    let mut out = String::new();
    let _ = writeln!(out, "digraph \"{}\" {{", escape(title));
    out.push_str("  rankdir=TB;\n  labelloc=t;\n");
    let _ = writeln!(out, "  label=\"{}\";", escape(title));
    out.push_str(
        "  node [shape=box, style=\"rounded,filled\", fontname=\"Roboto\", fontsize=10];\n",
    );
    for &l in locs {
        node_line(&mut out, &ids[&l], graph.instr(l), Some(l) == center);
    }
    let mut edges = 0;
    for &l in locs {
        for (k, op) in graph.operands_of(l).into_iter().enumerate() {
            if let Some(src) = ids.get(&op) {
                let _ = writeln!(out, "  {src} -> {} [tooltip=\"operand {k}\"];", ids[&l]);
                edges += 1;
            }
        }
        for p in &graph.instr(l).control_predecessors {
            if let Ok(pl) = graph.find(p)
                && let Some(src) = ids.get(&pl)
            {
                let _ = writeln!(
                    out,
                    "  {src} -> {} [style=dashed, tooltip=\"control\"];",
                    ids[&l]
                );
                edges += 1;
            }
        }
    }
    out.push_str("}\n");
    (out, edges)
}

/// DOT of a whole computation (instructions in printed order).
pub fn computation_dot(graph: &Graph<'_>, comp: usize) -> (String, usize, usize) {
    let c = &graph.module.computations[comp];
    let locs: Vec<Loc> = (0..c.instructions.len()).map(|i| (comp, i)).collect();
    let title = format!("Computation {}", c.name);
    let (dot, edges) = render(graph, &title, &locs, None);
    (dot, locs.len(), edges)
}

/// DOT of the neighborhood of `center` within `radius` hops.
pub fn neighborhood_dot(graph: &Graph<'_>, center: Loc, radius: usize) -> (String, usize, usize) {
    let nodes = graph.neighborhood(center, radius, Direction::Both, 0);
    let locs: Vec<Loc> = nodes
        .iter()
        .filter_map(|n| graph.find(&n.name).ok())
        .collect();
    let ins = graph.instr(center);
    let title = format!(
        "Neighborhood of {} nodes around {} (computation {})",
        locs.len(),
        ins.name,
        graph.comp_name(center)
    );
    let (dot, edges) = render(graph, &title, &locs, Some(center));
    (dot, locs.len(), edges)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::parse;

    #[test]
    fn dot_is_stable_and_complete() {
        let m = parse(
            "HloModule m\n\nENTRY main {\n  a = f32[] parameter(0)\n  b = f32[] negate(a)\n  ROOT c = f32[] add(a, b)\n}\n",
            "t",
        )
        .unwrap();
        let g = Graph::new(&m);
        let (dot, n, e) = neighborhood_dot(&g, g.find("b").unwrap(), 1);
        assert_eq!((n, e), (3, 3));
        assert!(dot.contains("n0 [label=\"b\\nnegate\\nf32[]\""), "{dot}");
        assert_eq!(dot, neighborhood_dot(&g, g.find("b").unwrap(), 1).0);
        let (_, n, e) = computation_dot(&g, 0);
        assert_eq!((n, e), (3, 3));
    }
}
