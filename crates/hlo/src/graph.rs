//! Graph algorithms over a parsed module: name lookup, users, neighborhoods (BFS over operand
//! and user edges) and shortest paths. Instruction names are unique across an XLA module, so
//! one index serves every computation; each result still carries its computation.

use std::collections::{HashMap, VecDeque};

use serde::Serialize;

use crate::error::HloError;
use crate::text::{Instruction, Module};

/// Position of an instruction: (computation index, instruction index).
pub type Loc = (usize, usize);

pub struct Graph<'m> {
    pub module: &'m Module,
    pub by_name: HashMap<&'m str, Loc>,
    /// users[comp][instr] = locations of the instructions using it as an operand.
    users: Vec<Vec<Vec<Loc>>>,
    /// Instructions calling each computation (by computation index).
    callers: Vec<Vec<Loc>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Both,
    Operands,
    Users,
}

impl Direction {
    pub fn parse(s: &str) -> Option<Direction> {
        match s {
            "both" | "" => Some(Direction::Both),
            "operands" | "upstream" => Some(Direction::Operands),
            "users" | "downstream" => Some(Direction::Users),
            _ => None,
        }
    }
}

/// One instruction of a neighborhood.
#[derive(Clone, Debug, Serialize)]
pub struct Neighbor {
    pub name: String,
    pub computation: String,
    pub opcode: String,
    pub distance: usize,
    /// How it was first reached from the target: `target`, `operand` (upstream), `user`
    /// (downstream), or with `follow_calls` `callee` / `caller` (into or out of a called
    /// computation).
    pub direction: &'static str,
    pub is_root: bool,
    pub line: String,
}

/// A step of a shortest path.
#[derive(Clone, Debug, Serialize)]
pub struct PathStep {
    pub name: String,
    pub opcode: String,
    pub computation: String,
    /// `start`, `-> (used_by)` or `-> (operand_of)`... see [`Graph::shortest_path`].
    pub relation: &'static str,
    pub expression: String,
}

impl<'m> Graph<'m> {
    pub fn new(module: &'m Module) -> Self {
        let mut by_name = HashMap::new();
        for (ci, c) in module.computations.iter().enumerate() {
            for (ii, ins) in c.instructions.iter().enumerate() {
                // Later definitions win, as in XLA's own text parser for duplicate names.
                by_name.insert(ins.name.as_str(), (ci, ii));
            }
        }
        let mut users: Vec<Vec<Vec<Loc>>> = module
            .computations
            .iter()
            .map(|c| vec![Vec::new(); c.instructions.len()])
            .collect();
        for (ci, c) in module.computations.iter().enumerate() {
            for (ii, ins) in c.instructions.iter().enumerate() {
                for op in &ins.operands {
                    if let Some(&(oc, oi)) = Self::lookup_in(&by_name, module, op, ci) {
                        let list = &mut users[oc][oi];
                        if !list.contains(&(ci, ii)) {
                            list.push((ci, ii));
                        }
                    }
                }
            }
        }
        let comp_index: HashMap<&str, usize> = module
            .computations
            .iter()
            .enumerate()
            .map(|(i, c)| (c.name.as_str(), i))
            .collect();
        let mut callers = vec![Vec::new(); module.computations.len()];
        for (ci, c) in module.computations.iter().enumerate() {
            for (ii, ins) in c.instructions.iter().enumerate() {
                for k in &ins.called_computations {
                    if let Some(&kc) = comp_index.get(k.as_str()) {
                        callers[kc].push((ci, ii));
                    }
                }
            }
        }
        Graph {
            module,
            by_name,
            users,
            callers,
        }
    }

    /// An operand name resolves within its own computation first (names are module-unique
    /// in XLA output, but hand-written text may reuse them across computations).
    fn lookup_in<'a>(
        by_name: &'a HashMap<&'m str, Loc>,
        module: &Module,
        name: &str,
        comp: usize,
    ) -> Option<&'a Loc> {
        let loc = by_name.get(name)?;
        if loc.0 == comp {
            return Some(loc);
        }
        // Fall back to the global definition when the computation has none of that name.
        if module.computations[comp]
            .instructions
            .iter()
            .any(|i| i.name == name)
        {
            None
        } else {
            Some(loc)
        }
    }

    pub fn instr(&self, loc: Loc) -> &'m Instruction {
        &self.module.computations[loc.0].instructions[loc.1]
    }

    pub fn comp_name(&self, loc: Loc) -> &'m str {
        &self.module.computations[loc.0].name
    }

    pub fn users_of(&self, loc: Loc) -> &[Loc] {
        &self.users[loc.0][loc.1]
    }

    pub fn operands_of(&self, loc: Loc) -> Vec<Loc> {
        let ins = self.instr(loc);
        ins.operands
            .iter()
            .filter_map(|o| Self::lookup_in(&self.by_name, self.module, o, loc.0).copied())
            .collect()
    }

    /// Find an instruction by name (a leading `%` is ignored); the error lists up to 10
    /// similar names (those containing the part before the first `.`).
    pub fn find(&self, name: &str) -> Result<Loc, HloError> {
        let name = name.trim();
        let name = name.strip_prefix('%').unwrap_or(name);
        if let Some(&loc) = self.by_name.get(name) {
            return Ok(loc);
        }
        let stem = name.split('.').next().unwrap_or(name);
        let mut similar: Vec<String> = if stem.is_empty() {
            Vec::new()
        } else {
            self.by_name
                .keys()
                .filter(|n| n.contains(stem))
                .map(|n| n.to_string())
                .collect()
        };
        similar.sort();
        similar.truncate(10);
        Err(HloError::InstructionNotFound {
            name: name.to_string(),
            scope: format!("module '{}'", self.module.name),
            similar,
        })
    }

    /// Breadth-first search from `target` over operand and/or user edges, up to `radius`
    /// hops. Operands are visited before users at each node; the result is sorted by
    /// (distance, name) and holds at most `max_nodes` entries (0 = no limit).
    pub fn neighborhood(
        &self,
        target: Loc,
        radius: usize,
        direction: Direction,
        max_nodes: usize,
    ) -> Vec<Neighbor> {
        self.neighborhood_with(target, radius, direction, max_nodes, false)
    }

    fn comp_of(&self, name: &str) -> Option<usize> {
        self.module.computations.iter().position(|c| c.name == name)
    }

    /// Opcodes whose called computation's parameter N is the caller's operand N.
    fn passes_operands(opcode: &str) -> bool {
        matches!(opcode, "fusion" | "call" | "while" | "async-start")
    }

    /// Call edges, upstream: a caller's called roots (`callee`), and for a parameter of a
    /// called computation, the caller's matching operand (`caller`).
    fn call_operands(&self, loc: Loc) -> Vec<(Loc, &'static str)> {
        let ins = self.instr(loc);
        let mut out = Vec::new();
        for k in ins
            .called_computations
            .iter()
            .filter_map(|k| self.comp_of(k))
        {
            if let Some(r) = self.module.computations[k]
                .instructions
                .iter()
                .position(|i| i.is_root)
            {
                out.push(((k, r), "callee"));
            }
        }
        if ins.opcode == "parameter"
            && let Some(n) = ins
                .literal
                .as_deref()
                .and_then(|l| l.trim().parse::<usize>().ok())
        {
            for &c in &self.callers[loc.0] {
                if Self::passes_operands(&self.instr(c).opcode)
                    && let Some(&o) = self.operands_of(c).get(n)
                {
                    out.push((o, "caller"));
                }
            }
        }
        out
    }

    /// Call edges, downstream: a called root's callers (`caller`), and the parameters that
    /// receive this instruction in the computations its users call (`callee`).
    fn call_users(&self, loc: Loc) -> Vec<(Loc, &'static str)> {
        let ins = self.instr(loc);
        let mut out = Vec::new();
        if ins.is_root {
            out.extend(self.callers[loc.0].iter().map(|&c| (c, "caller")));
        }
        for &u in self.users_of(loc) {
            let user = self.instr(u);
            if !Self::passes_operands(&user.opcode) {
                continue;
            }
            let positions: Vec<usize> = self
                .operands_of(u)
                .iter()
                .enumerate()
                .filter(|(_, o)| **o == loc)
                .map(|(i, _)| i)
                .collect();
            for k in user
                .called_computations
                .iter()
                .filter_map(|k| self.comp_of(k))
            {
                for (pi, p) in self.module.computations[k].instructions.iter().enumerate() {
                    let n = p
                        .literal
                        .as_deref()
                        .and_then(|l| l.trim().parse::<usize>().ok());
                    if p.opcode == "parameter" && n.is_some_and(|n| positions.contains(&n)) {
                        out.push(((k, pi), "callee"));
                    }
                }
            }
        }
        out
    }

    /// [`Graph::neighborhood`], optionally also stepping into called computations and back
    /// out to callers (`follow_calls`); such steps are labelled `callee` / `caller`.
    pub fn neighborhood_with(
        &self,
        target: Loc,
        radius: usize,
        direction: Direction,
        max_nodes: usize,
        follow_calls: bool,
    ) -> Vec<Neighbor> {
        let mut seen: HashMap<Loc, (usize, &'static str)> = HashMap::new();
        seen.insert(target, (0, "target"));
        let mut queue = VecDeque::from([target]);
        while let Some(loc) = queue.pop_front() {
            let (d, _) = seen[&loc];
            if d >= radius {
                continue;
            }
            let mut next: Vec<(Loc, &'static str)> = Vec::new();
            if direction != Direction::Users {
                next.extend(self.operands_of(loc).into_iter().map(|l| (l, "operand")));
                if follow_calls {
                    next.extend(self.call_operands(loc));
                }
            }
            if direction != Direction::Operands {
                next.extend(self.users_of(loc).iter().map(|&l| (l, "user")));
                if follow_calls {
                    next.extend(self.call_users(loc));
                }
            }
            for (n, how) in next {
                if let std::collections::hash_map::Entry::Vacant(e) = seen.entry(n) {
                    e.insert((d + 1, how));
                    queue.push_back(n);
                }
            }
        }
        let mut out: Vec<Neighbor> = seen
            .into_iter()
            .map(|(loc, (distance, direction))| {
                let ins = self.instr(loc);
                Neighbor {
                    name: ins.name.clone(),
                    computation: self.comp_name(loc).to_string(),
                    opcode: ins.opcode.clone(),
                    distance,
                    direction,
                    is_root: ins.is_root,
                    line: ins.text.clone(),
                }
            })
            .collect();
        out.sort_by(|a, b| (a.distance, &a.name).cmp(&(b.distance, &b.name)));
        if max_nodes > 0 {
            out.truncate(max_nodes);
        }
        out
    }

    /// Shortest path from `src` to `dst` following data flow: first downstream (operand →
    /// user), else upstream (user → operand). Returns the direction and the steps.
    pub fn shortest_path(&self, src: Loc, dst: Loc) -> Option<(&'static str, Vec<PathStep>)> {
        for (dir_name, downstream) in [("downstream", true), ("upstream", false)] {
            let mut prev: HashMap<Loc, Loc> = HashMap::new();
            let mut queue = VecDeque::from([src]);
            let mut found = src == dst;
            while let Some(loc) = queue.pop_front() {
                if found {
                    break;
                }
                let next: Vec<Loc> = if downstream {
                    self.users_of(loc).to_vec()
                } else {
                    self.operands_of(loc)
                };
                for n in next {
                    if n != src && !prev.contains_key(&n) {
                        prev.insert(n, loc);
                        if n == dst {
                            found = true;
                            break;
                        }
                        queue.push_back(n);
                    }
                }
            }
            if !found {
                continue;
            }
            let mut locs = vec![dst];
            let mut cur = dst;
            while cur != src {
                cur = prev[&cur];
                locs.push(cur);
            }
            locs.reverse();
            let steps = locs
                .iter()
                .enumerate()
                .map(|(k, &l)| {
                    let ins = self.instr(l);
                    PathStep {
                        name: ins.name.clone(),
                        opcode: ins.opcode.clone(),
                        computation: self.comp_name(l).to_string(),
                        relation: if k == 0 {
                            "start"
                        } else if downstream {
                            "-> (used_by)"
                        } else {
                            "-> (operand)"
                        },
                        expression: ins.text.clone(),
                    }
                })
                .collect();
            return Some((dir_name, steps));
        }
        None
    }
}

/// Render a neighborhood the way the dump tool prints it: two spaces × (distance + 1), then
/// the marker, the computation in brackets and the definition line.
pub fn render_neighborhood(nodes: &[Neighbor]) -> String {
    let mut out = String::new();
    for n in nodes {
        let marker = if n.distance == 0 {
            "[TARGET]".to_string()
        } else {
            format!("[dist={}]", n.distance)
        };
        out.push_str(&" ".repeat(2 * (n.distance + 1)));
        out.push(' ');
        out.push_str(&marker);
        out.push_str(&format!(" [{}] {}\n", n.computation, n.line));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::parse;

    const T: &str = "HloModule m\n\nENTRY main {\n  a = f32[] parameter(0)\n  b = f32[] negate(a)\n  c = f32[] exponential(b)\n  ROOT d = f32[] add(c, a)\n}\n";

    #[test]
    fn neighborhood_follows_operands_and_users_including_root() {
        let m = parse(T, "t").unwrap();
        let g = Graph::new(&m);
        let a = g.find("%a").unwrap();
        let n = g.neighborhood(a, 1, Direction::Both, 0);
        let names: Vec<_> = n
            .iter()
            .map(|x| (x.name.as_str(), x.distance, x.direction))
            .collect();
        assert_eq!(
            names,
            vec![("a", 0, "target"), ("b", 1, "user"), ("d", 1, "user")]
        );
        let d = g.find("d").unwrap();
        let n = g.neighborhood(d, 2, Direction::Operands, 0);
        let names: Vec<_> = n.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, vec!["d", "a", "c", "b"]);
        let n = g.neighborhood(d, 2, Direction::Users, 0);
        assert_eq!(n.len(), 1);
    }

    #[test]
    fn follow_calls_crosses_into_fusions_and_back() {
        let m = parse(
            "HloModule m\n\n%f (p0: f32[], p1: f32[]) -> f32[] {\n  %p0 = f32[] parameter(0)\n  %p1 = f32[] parameter(1)\n  ROOT %s = f32[] add(%p0, %p1)\n}\n\nENTRY %main {\n  %a = f32[] parameter(0)\n  %b = f32[] parameter(1)\n  ROOT %fu = f32[] fusion(%a, %b), kind=kLoop, calls=%f\n}\n",
            "t",
        )
        .unwrap();
        let g = Graph::new(&m);
        let plain = g.neighborhood(g.find("fu").unwrap(), 1, Direction::Both, 0);
        assert_eq!(plain.len(), 3);
        let n = g.neighborhood_with(g.find("fu").unwrap(), 1, Direction::Operands, 0, true);
        let got: Vec<_> = n.iter().map(|x| (x.name.as_str(), x.direction)).collect();
        assert_eq!(
            got,
            vec![
                ("fu", "target"),
                ("a", "operand"),
                ("b", "operand"),
                ("s", "callee")
            ]
        );
        // From the parameter p1 back out to the caller's operand b.
        let n = g.neighborhood_with(g.find("p1").unwrap(), 1, Direction::Operands, 0, true);
        assert_eq!(n[1].name, "b");
        assert_eq!(n[1].direction, "caller");
        // Downstream from b into the fusion's p1, and from the root s out to fu.
        let n = g.neighborhood_with(g.find("b").unwrap(), 1, Direction::Users, 0, true);
        let got: Vec<_> = n.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(got, vec!["b", "fu", "p1"]);
        let n = g.neighborhood_with(g.find("s").unwrap(), 1, Direction::Users, 0, true);
        assert_eq!(n[1].name, "fu");
    }

    #[test]
    fn shortest_path_and_not_found() {
        let m = parse(T, "t").unwrap();
        let g = Graph::new(&m);
        let (dir, p) = g
            .shortest_path(g.find("a").unwrap(), g.find("d").unwrap())
            .unwrap();
        assert_eq!(dir, "downstream");
        assert_eq!(p.len(), 2);
        let (dir, p) = g
            .shortest_path(g.find("c").unwrap(), g.find("a").unwrap())
            .unwrap();
        assert_eq!((dir, p.len()), ("upstream", 3));
        let e = g.find("b.7").unwrap_err().to_string();
        assert!(e.contains("Similar: %b"), "{e}");
    }
}
