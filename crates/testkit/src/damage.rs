//! Damaged copies of real inputs for robustness tests: a deterministic random generator, and
//! text files with lines deleted, repeated, swapped, cut short or replaced by garbage, numbers
//! made huge or negative, files cut at any byte.

use std::path::Path;

/// A small deterministic generator (the same mutants every run).
pub struct Lcg(pub u64);

impl Lcg {
    /// The next number (53 bits).
    pub fn draw(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 11
    }
    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.draw() % n.max(1) as u64) as usize
    }
    /// An integer that often breaks arithmetic: 0, -1, the extremes, huge, random.
    pub fn odd_i64(&mut self) -> i64 {
        [
            0,
            -1,
            i64::MIN,
            i64::MAX,
            i64::MAX / 2,
            -(self.draw() as i64),
            self.draw() as i64,
            1 << 40,
        ][self.below(8)]
    }
}

/// One random change to one file's text.
pub fn damage_text(text: &mut Vec<u8>, r: &mut Lcg) {
    if text.is_empty() {
        return;
    }
    let mut lines: Vec<Vec<u8>> = text.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
    let n = lines.len();
    let k = r.below(n);
    match r.below(7) {
        0 => {
            lines.remove(k);
        }
        1 => {
            let l = lines[k].clone();
            lines.insert(k, l);
        }
        2 => {
            let cut = r.below(lines[k].len() + 1);
            lines[k].truncate(cut);
        }
        3 => {
            // The first run of digits on the line: huge, negative or zero.
            let l = &lines[k];
            if let Some(a) = l.iter().position(u8::is_ascii_digit) {
                let b = a + l[a..].iter().take_while(|c| c.is_ascii_digit()).count();
                let with: &[u8] = [&b"99999999999999999999999"[..], b"-1", b"0"][r.below(3)];
                lines[k].splice(a..b, with.iter().copied());
            }
        }
        4 => {
            let j = r.below(n);
            lines.swap(k, j);
        }
        5 => {
            let garbage: &[u8] = [
                &b"%%% ??? { [ ( \xff\xfe"[..],
                b"0x",
                b"}}}}",
                b"  %x = f32[] custom-call(), custom_call_target=\"",
            ][r.below(4)];
            lines.insert(k, garbage.to_vec());
        }
        _ => {
            let joined = lines.join(&b'\n');
            *text = joined[..r.below(joined.len() + 1)].to_vec();
            return;
        }
    }
    *text = lines.join(&b'\n');
}

/// Copies of `dirs`' files under `into`, each changed `changes` times in all (spread over the
/// files at random).
pub fn damaged_copy(dirs: &[(&str, &Path)], into: &Path, changes: u64, r: &mut Lcg) {
    let mut files: Vec<(std::path::PathBuf, Vec<u8>)> = Vec::new();
    for (name, dir) in dirs {
        let dst = into.join(name);
        std::fs::create_dir_all(&dst).unwrap();
        let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            if e.path().is_file() {
                files.push((dst.join(e.file_name()), std::fs::read(e.path()).unwrap()));
            }
        }
    }
    for _ in 0..changes {
        let k = r.below(files.len());
        damage_text(&mut files[k].1, r);
    }
    for (p, bytes) in files {
        std::fs::write(p, bytes).unwrap();
    }
}

/// One random change to an HLO module and its buffer assignment: an operand, callee, root or
/// entry pointing at a missing or cyclic id, an instruction removed or repeated, an odd
/// opcode, shape or tuple index, a logical buffer, allocation or heap-trace event pointing
/// nowhere or sized oddly.
pub fn damage_hlo(hlo: &mut xprof_proto::xla::HloProto, r: &mut Lcg) {
    let kind = r.below(12);
    if kind >= 9 {
        let Some(ba) = hlo.buffer_assignment.as_mut() else {
            return;
        };
        match kind {
            9 if !ba.logical_buffers.is_empty() => {
                let k = r.below(ba.logical_buffers.len());
                let b = &mut ba.logical_buffers[k];
                if r.below(2) == 0 {
                    b.id = r.odd_i64();
                } else {
                    b.size = r.odd_i64();
                }
            }
            10 if !ba.buffer_allocations.is_empty() => {
                let k = r.below(ba.buffer_allocations.len());
                let a = &mut ba.buffer_allocations[k];
                a.size = r.odd_i64();
                if !a.assigned.is_empty() {
                    let j = r.below(a.assigned.len());
                    a.assigned[j].offset = r.odd_i64();
                    a.assigned[j].logical_buffer_id = r.odd_i64();
                }
            }
            _ => {
                if let Some(t) = ba.heap_simulator_traces.first_mut()
                    && !t.events.is_empty()
                {
                    let k = r.below(t.events.len());
                    t.events[k].buffer_id = r.odd_i64();
                    t.events[k].kind = r.odd_i64() as i32;
                }
            }
        }
        return;
    }
    let Some(m) = hlo.hlo_module.as_mut() else {
        return;
    };
    if m.computations.is_empty() {
        return;
    }
    let ids: Vec<i64> = m
        .computations
        .iter()
        .flat_map(|c| c.instructions.iter().map(|i| i.id))
        .collect();
    let any_id = |r: &mut Lcg| {
        if r.below(2) == 0 && !ids.is_empty() {
            ids[r.below(ids.len())]
        } else {
            r.odd_i64()
        }
    };
    match kind {
        0 => m.entry_computation_id = any_id(r),
        _ => {
            let nc = m.computations.len();
            let ci = r.below(nc);
            let comp_ids: Vec<i64> = m.computations.iter().map(|c| c.id).collect();
            let c = &mut m.computations[ci];
            if kind == 1 {
                c.root_id = any_id(r);
                return;
            }
            if c.instructions.is_empty() {
                return;
            }
            let ii = r.below(c.instructions.len());
            match kind {
                2 => {
                    let own = c.instructions[ii].id;
                    let id = if r.below(3) == 0 { own } else { any_id(r) };
                    let ins = &mut c.instructions[ii];
                    if ins.operand_ids.is_empty() {
                        ins.operand_ids.push(id);
                    } else {
                        let k = r.below(ins.operand_ids.len());
                        ins.operand_ids[k] = id;
                    }
                }
                3 => {
                    let callee = if r.below(2) == 0 {
                        comp_ids[r.below(comp_ids.len())]
                    } else {
                        r.odd_i64()
                    };
                    c.instructions[ii].called_computation_ids.push(callee);
                }
                4 => {
                    c.instructions.remove(ii);
                }
                5 => {
                    let dup = c.instructions[ii].clone();
                    c.instructions.push(dup);
                }
                6 => {
                    c.instructions[ii].opcode = [
                        "fusion",
                        "while",
                        "call",
                        "custom-call",
                        "tuple",
                        "get-tuple-element",
                        "parameter",
                        "conditional",
                        "all-reduce",
                        "",
                        "no-such-op",
                    ][r.below(11)]
                    .to_string();
                }
                7 => {
                    let odd = r.odd_i64();
                    let ins = &mut c.instructions[ii];
                    if let Some(s) = ins.shape.as_mut() {
                        if s.dimensions.is_empty() {
                            s.dimensions.push(odd);
                        } else {
                            let k = r.below(s.dimensions.len());
                            s.dimensions[k] = odd;
                        }
                    } else {
                        ins.shape = Some(Default::default());
                    }
                }
                _ => c.instructions[ii].tuple_index = r.odd_i64(),
            }
        }
    }
}
