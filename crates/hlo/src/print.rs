//! HLO text printed from an `xla.HloModuleProto` the way XLA prints a module
//! (`HloModule::ToString`): what XProf's graph viewer returns as `long_txt` (default print
//! options, large constants in full) and `short_txt` (`HloPrintOptions::ShortParsable`).
//!
//! Order follows XLA after `HloModule::CreateFromProto`: computations sorted by proto id,
//! instructions in proto order; computations printed in post order (callees before callers); instructions in
//! the module schedule's sequence when the computation is scheduled, else in XLA's DFS post
//! order (operands first, control predecessors before operands).

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use xprof_proto::xla::{
    HloComputationProto, HloInstructionProto, HloModuleProto, LayoutProto, LiteralProto,
    OpMetadata, OpSharding, PrimitiveType, ShapeProto, Window,
};

/// Which of XLA's print-option presets to follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// Default options (+ large constants): `%` names, computation signatures, operand index
    /// annotations every 5 operands, control predecessors.
    Long,
    /// `ShortParsable`: no `%`, no signatures, no annotations, no control predecessors, large
    /// constants elided as `{...}`.
    Short,
}

#[derive(Clone, Copy, Debug)]
pub struct PrintOptions {
    pub style: Style,
    /// `metadata={...}` on instructions (and the stack-frame tables in the header).
    pub metadata: bool,
    /// Each operand's shape before its name (XLA `print_operand_shape`), as one instruction
    /// prints alone (`HloInstruction::ToString`); whole modules print without.
    pub operand_shapes: bool,
    /// `backend_config=...` on instructions (XLA `print_backend_config`).
    pub backend_config: bool,
}

impl PrintOptions {
    pub fn long() -> Self {
        PrintOptions {
            style: Style::Long,
            metadata: false,
            operand_shapes: false,
            backend_config: true,
        }
    }
    pub fn short() -> Self {
        PrintOptions {
            style: Style::Short,
            metadata: false,
            operand_shapes: false,
            backend_config: true,
        }
    }
    /// One instruction as XProf prints an op's expression (`UncachedExpression`: XLA's
    /// `HloInstruction::ToString` without metadata and backend config): the long style with
    /// operand shapes, the long name XProf shows for an op.
    pub fn instruction() -> Self {
        PrintOptions {
            operand_shapes: true,
            backend_config: false,
            ..Self::long()
        }
    }
    fn percent(&self) -> &'static str {
        if self.style == Style::Long { "%" } else { "" }
    }
}

// ---------------------------------------------------------------------------------------------
// Shapes

/// Bits of one element of primitive type `t` (0 for tuples, tokens, opaque and unknown types).
pub fn element_bits(t: i32) -> u64 {
    use PrimitiveType as P;
    match P::try_from(t).unwrap_or(P::Invalid) {
        P::S1 | P::U1 => 1,
        P::S2 | P::U2 => 2,
        P::S4 | P::U4 | P::F4e2m1fn => 4,
        P::Pred
        | P::S8
        | P::U8
        | P::F8e5m2
        | P::F8e4m3
        | P::F8e4m3fn
        | P::F8e4m3b11fnuz
        | P::F8e3m4
        | P::F8e5m2fnuz
        | P::F8e4m3fnuz
        | P::F8e8m0fnu => 8,
        P::S16 | P::U16 | P::F16 | P::Bf16 => 16,
        P::S32 | P::U32 | P::F32 => 32,
        P::S64 | P::U64 | P::F64 | P::C64 => 64,
        P::C128 => 128,
        _ => 0,
    }
}

pub fn type_name(t: i32) -> String {
    match PrimitiveType::try_from(t) {
        Ok(PrimitiveType::OpaqueType) => "opaque".into(),
        Ok(p) => p.as_str_name().to_ascii_lowercase(),
        Err(_) => format!("type{t}"),
    }
}

/// `ShapeUtil::HumanString` (no layout).
pub fn shape_string(s: &ShapeProto) -> String {
    let mut out = String::new();
    write_shape(&mut out, s, false);
    out
}

/// `ShapeUtil::HumanStringWithLayout`.
pub fn shape_with_layout(s: &ShapeProto) -> String {
    let mut out = String::new();
    write_shape(&mut out, s, true);
    out
}

fn is_tuple(s: &ShapeProto) -> bool {
    s.element_type == PrimitiveType::Tuple as i32
}

fn is_array(s: &ShapeProto) -> bool {
    let t = s.element_type;
    !(t == PrimitiveType::Tuple as i32
        || t == PrimitiveType::Token as i32
        || t == PrimitiveType::OpaqueType as i32
        || t == PrimitiveType::Invalid as i32)
}

fn write_shape(out: &mut String, s: &ShapeProto, layout: bool) {
    if is_tuple(s) {
        out.push('(');
        for (i, t) in s.tuple_shapes.iter().enumerate() {
            if i > 0 {
                if i % 5 == 0 {
                    let _ = write!(out, ", /*index={i}*/");
                } else {
                    out.push_str(", ");
                }
            }
            write_shape(out, t, layout);
        }
        out.push(')');
        return;
    }
    out.push_str(&type_name(s.element_type));
    out.push('[');
    for (i, d) in s.dimensions.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        if s.is_dynamic_dimension.get(i).copied().unwrap_or(false) {
            if *d == i64::MIN {
                out.push('?');
            } else {
                let _ = write!(out, "<={d}");
            }
        } else {
            let _ = write!(out, "{d}");
        }
    }
    out.push(']');
    if layout
        && is_array(s)
        && let Some(l) = &s.layout
    {
        let ls = layout_string(l);
        if !(s.dimensions.is_empty() && ls == "{}") {
            out.push_str(&ls);
        }
    }
}

/// `Layout::ToString`: `{1,0:T(8,128)S(1)}`.
pub fn layout_string(l: &LayoutProto) -> String {
    let mut out = String::from("{");
    out.push_str(&join(&l.minor_to_major, ","));
    let mut colon = false;
    let mut c = |out: &mut String| {
        if !colon {
            out.push(':');
            colon = true;
        }
    };
    if l.index_primitive_type != 0 {
        c(&mut out);
        let _ = write!(out, "#({})", type_name(l.index_primitive_type));
    }
    if l.pointer_primitive_type != 0 {
        c(&mut out);
        let _ = write!(out, "*({})", type_name(l.pointer_primitive_type));
    }
    if !l.dim_level_types.is_empty() && l.dim_level_types.iter().any(|&d| d != 0) {
        c(&mut out);
        let names: Vec<&str> = l
            .dim_level_types
            .iter()
            .map(|d| match d {
                1 => "C",
                2 => "S",
                3 => "H",
                _ => "D",
            })
            .collect();
        let _ = write!(out, "D({})", names.join(","));
    }
    if !l.tiles.is_empty() {
        c(&mut out);
        for t in &l.tiles {
            let dims: Vec<String> = t
                .dimensions
                .iter()
                .map(|d| {
                    if *d == i64::MIN {
                        "*".into()
                    } else {
                        d.to_string()
                    }
                })
                .collect();
            let _ = write!(out, "T({})", dims.join(","));
        }
    }
    if l.tail_padding_alignment_in_elements > 1 {
        c(&mut out);
        let _ = write!(out, "L({})", l.tail_padding_alignment_in_elements);
    }
    if l.element_size_in_bits != 0 {
        c(&mut out);
        let _ = write!(out, "E({})", l.element_size_in_bits);
    }
    if l.memory_space != 0 {
        c(&mut out);
        let _ = write!(out, "S({})", l.memory_space);
    }
    if !l.split_configs.is_empty() {
        c(&mut out);
        for sc in &l.split_configs {
            let _ = write!(out, "SC({}:{})", sc.dimension, join(&sc.split_indices, ","));
        }
    }
    if let Some(p) = &l.physical_shape {
        c(&mut out);
        let _ = write!(out, "P({})", shape_with_layout(p));
    }
    if l.dynamic_shape_metadata_prefix_bytes > 0 {
        c(&mut out);
        let _ = write!(out, "M({})", l.dynamic_shape_metadata_prefix_bytes);
    }
    out.push('}');
    out
}

fn join<T: std::fmt::Display>(v: &[T], sep: &str) -> String {
    let mut s = String::new();
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            s.push_str(sep);
        }
        let _ = write!(s, "{x}");
    }
    s
}

fn brace_list<T: std::fmt::Display>(v: &[T]) -> String {
    format!("{{{}}}", join(v, ","))
}

// ---------------------------------------------------------------------------------------------
// Numbers and strings

/// C's `%.{precision}g`.
pub fn format_g(v: f64, precision: usize) -> String {
    if v.is_nan() {
        return if v.is_sign_negative() {
            "-nan".into()
        } else {
            "nan".into()
        };
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf".into() } else { "inf".into() };
    }
    if v == 0.0 {
        return if v.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let p = precision.max(1);
    let sci = format!("{:.*e}", p - 1, v);
    let (mant, exp) = sci.split_once('e').expect("exponent");
    let exp: i32 = exp.parse().expect("exponent digits");
    if exp < -4 || exp >= p as i32 {
        let mant = strip_zeros(mant);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (p as i32 - 1 - exp).max(0) as usize;
        strip_zeros(&format!("{:.*}", decimals, v))
    }
}

fn strip_zeros(s: &str) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s.to_string()
    }
}

/// `absl::CEscape`.
pub fn c_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for &b in s.as_bytes() {
        match b {
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            b'"' => out.push_str("\\\""),
            b'\'' => out.push_str("\\'"),
            b'\\' => out.push_str("\\\\"),
            0x20..=0x7e => out.push(b as char),
            _ => {
                let _ = write!(out, "\\{b:03o}");
            }
        }
    }
    out
}

/// XLA's `LexesAsJsonDict`, approximated: a `{...}` object whose braces balance.
fn lexes_as_json_dict(s: &str) -> bool {
    let t = s.trim();
    if !t.starts_with('{') || !t.ends_with('}') {
        return false;
    }
    let b = t.as_bytes();
    let mut depth = 0i64;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 && i != b.len() - 1 {
                    return false;
                }
            }
            _ => {}
        }
        i += 1;
    }
    depth == 0
}

// ---------------------------------------------------------------------------------------------
// Literals

fn f16_to_f64(bits: u16) -> f64 {
    let sign = if bits & 0x8000 != 0 { -1.0 } else { 1.0 };
    let exp = ((bits >> 10) & 0x1f) as i32;
    let frac = (bits & 0x3ff) as f64;
    match exp {
        0 => sign * frac * 2f64.powi(-24),
        31 => {
            if frac == 0.0 {
                sign * f64::INFINITY
            } else {
                f64::NAN
            }
        }
        _ => sign * (1.0 + frac / 1024.0) * 2f64.powi(exp - 15),
    }
}

/// Element `i` (in storage order) of a literal as XLA prints it, or `None` when the literal
/// does not carry that many elements.
fn literal_element(lit: &LiteralProto, ty: i32, i: usize) -> Option<String> {
    let t = PrimitiveType::try_from(ty).ok()?;
    use PrimitiveType as P;
    Some(match t {
        P::Pred => lit.preds.get(i).map(|b| b.to_string())?,
        P::S8 => (*lit.s8s.get(i)? as i8).to_string(),
        P::U8 => lit.u8s.get(i)?.to_string(),
        P::S16 => {
            let b = lit.s16s.get(2 * i..2 * i + 2)?;
            i16::from_le_bytes([b[0], b[1]]).to_string()
        }
        P::U16 => {
            let b = lit.u16s.get(2 * i..2 * i + 2)?;
            u16::from_le_bytes([b[0], b[1]]).to_string()
        }
        P::S32 => lit.s32s.get(i)?.to_string(),
        P::S64 => lit.s64s.get(i)?.to_string(),
        P::U32 => lit.u32s.get(i)?.to_string(),
        P::U64 => lit.u64s.get(i)?.to_string(),
        P::F32 => format_g(*lit.f32s.get(i)? as f64, 9),
        P::F64 => format_g(*lit.f64s.get(i)?, 17),
        P::F16 => {
            let b = lit.f16s.get(2 * i..2 * i + 2)?;
            format_g(f16_to_f64(u16::from_le_bytes([b[0], b[1]])), 5)
        }
        P::Bf16 => {
            let b = lit.bf16s.get(2 * i..2 * i + 2)?;
            let bits = (u16::from_le_bytes([b[0], b[1]]) as u32) << 16;
            format_g(f32::from_bits(bits) as f64, 4)
        }
        P::C64 => {
            let re = lit.c64s.get(2 * i)?;
            let im = lit.c64s.get(2 * i + 1)?;
            format!("({}, {})", format_g(*re as f64, 9), format_g(*im as f64, 9))
        }
        P::C128 => {
            let re = lit.c128s.get(2 * i)?;
            let im = lit.c128s.get(2 * i + 1)?;
            format!("({}, {})", format_g(*re, 17), format_g(*im, 17))
        }
        _ => return None,
    })
}

/// The literal's elements in logical (row-major) order, mapped through the layout.
fn literal_values(lit: &LiteralProto, shape: &ShapeProto) -> Option<Vec<String>> {
    let dims: Vec<usize> = shape
        .dimensions
        .iter()
        .map(|&d| d.max(0) as usize)
        .collect();
    // A malformed shape must not make us allocate (or overflow) before the literal's own
    // element count says it cannot be printed.
    let n = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d))?;
    if n > 1 << 26 {
        return None;
    }
    let m2m: Vec<usize> = shape
        .layout
        .as_ref()
        .map(|l| l.minor_to_major.iter().map(|&d| d as usize).collect())
        .filter(|v: &Vec<usize>| v.len() == dims.len())
        .unwrap_or_else(|| (0..dims.len()).rev().collect());
    // Strides of the storage (minor-to-major) order.
    let mut stride = vec![0usize; dims.len()];
    let mut s = 1;
    for &d in &m2m {
        stride[d] = s;
        s *= dims[d];
    }
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; dims.len()];
    for _ in 0..n {
        let lin: usize = idx.iter().zip(&stride).map(|(i, s)| i * s).sum();
        out.push(literal_element(lit, shape.element_type, lin)?);
        for k in (0..dims.len()).rev() {
            idx[k] += 1;
            if idx[k] < dims[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    Some(out)
}

/// `LiteralBase::ToStringWithoutShapeOneline` for arrays.
fn literal_oneline(lit: &LiteralProto, shape: &ShapeProto) -> Option<String> {
    let vals = literal_values(lit, shape)?;
    let dims: Vec<usize> = shape
        .dimensions
        .iter()
        .map(|&d| d.max(0) as usize)
        .collect();
    Some(match dims.len() {
        0 => vals.first()?.clone(),
        1 => format!("{{{}}}", vals.join(", ")),
        _ => {
            fn rec(vals: &[String], dims: &[usize]) -> String {
                if dims.len() == 1 {
                    return format!("{{ {} }}", vals.join(", "));
                }
                let inner: usize = dims[1..].iter().product();
                let parts: Vec<String> = (0..dims[0])
                    .map(|i| rec(&vals[i * inner..(i + 1) * inner], &dims[1..]))
                    .collect();
                format!("{{ {} }}", parts.join(", "))
            }
            rec(&vals, &dims)
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Attributes

fn metadata_string(m: &OpMetadata) -> String {
    let mut parts: Vec<String> = Vec::new();
    if !m.op_type.is_empty() {
        parts.push(format!("op_type=\"{}\"", c_escape(&m.op_type)));
    }
    if !m.op_name.is_empty() {
        parts.push(format!("op_name=\"{}\"", c_escape(&m.op_name)));
    }
    if !m.source_file.is_empty() {
        parts.push(format!("source_file=\"{}\"", c_escape(&m.source_file)));
    }
    if m.source_line != 0 {
        parts.push(format!("source_line={}", m.source_line));
    }
    if m.source_end_line != 0 {
        parts.push(format!("source_end_line={}", m.source_end_line));
    }
    if m.source_column != 0 {
        parts.push(format!("source_column={}", m.source_column));
    }
    if m.source_end_column != 0 {
        parts.push(format!("source_end_column={}", m.source_end_column));
    }
    if !m.deduplicated_name.is_empty() {
        parts.push(format!(
            "deduplicated_name=\"{}\"",
            c_escape(&m.deduplicated_name)
        ));
    }
    if !m.scheduling_name.is_empty() {
        parts.push(format!(
            "scheduling_name=\"{}\"",
            c_escape(&m.scheduling_name)
        ));
    }
    if m.stack_frame_id != 0 {
        parts.push(format!("stack_frame_id={}", m.stack_frame_id));
    }
    parts.join(" ")
}

fn window_string(w: &Window) -> String {
    let dims = &w.dimensions;
    let mut s = String::new();
    let field =
        |s: &mut String, head: &str, f: &dyn Fn(&xprof_proto::xla::WindowDimension) -> String| {
            s.push_str(head);
            s.push('=');
            s.push_str(&dims.iter().map(f).collect::<Vec<_>>().join("x"));
        };
    if !dims.is_empty() {
        field(&mut s, "size", &|d| d.size.to_string());
    }
    if dims.iter().any(|d| d.stride != 1) {
        field(&mut s, " stride", &|d| d.stride.to_string());
    }
    if dims
        .iter()
        .any(|d| d.padding_low != 0 || d.padding_high != 0)
    {
        field(&mut s, " pad", &|d| {
            format!("{}_{}", d.padding_low, d.padding_high)
        });
    }
    if dims.iter().any(|d| d.base_dilation != 1) {
        field(&mut s, " lhs_dilate", &|d| d.base_dilation.to_string());
    }
    if dims.iter().any(|d| d.window_dilation != 1) {
        field(&mut s, " rhs_dilate", &|d| d.window_dilation.to_string());
    }
    if dims.iter().any(|d| d.window_reversal) {
        field(&mut s, " rhs_reversal", &|d| {
            if d.window_reversal {
                "1".into()
            } else {
                "0".into()
            }
        });
    }
    s
}

fn sharding_string(s: &OpSharding) -> String {
    // OpSharding.Type: REPLICATED=0, MAXIMAL=1, TUPLE=2, OTHER=3, MANUAL=4, UNKNOWN=5.
    match s.r#type {
        0 => "{replicated}".into(),
        1 => format!(
            "{{maximal device={}}}",
            s.tile_assignment_devices.first().copied().unwrap_or(0)
        ),
        2 => format!(
            "{{{}}}",
            s.tuple_shardings
                .iter()
                .map(sharding_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        4 => "{manual}".into(),
        5 => "{unknown}".into(),
        _ => {
            let dims = join(&s.tile_assignment_dimensions, ",");
            let devices = if !s.iota_reshape_dims.is_empty() {
                let mut d = format!("<=[{}]", join(&s.iota_reshape_dims, ","));
                if !s.iota_transpose_perm.is_empty() {
                    let _ = write!(d, "T({})", join(&s.iota_transpose_perm, ","));
                }
                d
            } else {
                join(&s.tile_assignment_devices, ",")
            };
            let mut out = format!("{{devices=[{dims}]{devices}");
            if s.replicate_on_last_tile_dim {
                out.push_str(" last_tile_dim_replicate");
            }
            out.push('}');
            out
        }
    }
}

fn replica_groups_string(ins: &HloInstructionProto) -> Option<String> {
    if let Some(list) = &ins.collective_device_list {
        if let Some(iota) = &list.iota_replica_group_list {
            let mut s = format!(
                "[{},{}]<=[{}]",
                iota.num_replica_groups,
                iota.num_devices_per_group,
                join(&iota.iota_reshape_dims, ",")
            );
            if !iota.iota_transpose_perm.is_empty() {
                let _ = write!(s, "T({})", join(&iota.iota_transpose_perm, ","));
            }
            return Some(s);
        }
        if !list.replica_groups.is_empty() {
            return Some(groups(&list.replica_groups));
        }
    }
    fn groups(g: &[xprof_proto::xla::ReplicaGroup]) -> String {
        format!(
            "{{{}}}",
            g.iter()
                .map(|r| brace_list(&r.replica_ids))
                .collect::<Vec<_>>()
                .join(",")
        )
    }
    #[allow(deprecated)] // the legacy field is what older captures carry
    let legacy = &ins.replica_groups;
    Some(groups(legacy))
}

const PRECISION: &[&str] = &["default", "high", "highest", "packed_nibble"];

fn conv_dim_labels(d: &xprof_proto::xla::ConvolutionDimensionNumbers) -> String {
    // XLA's ConvolutionDimensionNumbersToString: b/f plus spatial digits per side.
    format!(
        "{}_{}->{}",
        dim_labels(
            &d.input_spatial_dimensions,
            [
                (d.input_batch_dimension, 'b'),
                (d.input_feature_dimension, 'f')
            ]
        ),
        dim_labels(
            &d.kernel_spatial_dimensions,
            [
                (d.kernel_input_feature_dimension, 'i'),
                (d.kernel_output_feature_dimension, 'o')
            ]
        ),
        dim_labels(
            &d.output_spatial_dimensions,
            [
                (d.output_batch_dimension, 'b'),
                (d.output_feature_dimension, 'f')
            ]
        )
    )
}

/// One side of a convolution's dimension labels: rank = spatial dims + 2, the two named
/// dimensions lettered, spatial ones numbered in order, `?` for any left unassigned.
fn dim_labels(spatial: &[i64], named: [(i64, char); 2]) -> String {
    let mut v = vec!['?'; spatial.len() + 2];
    for (dim, c) in named {
        if let Some(x) = v.get_mut(dim as usize) {
            *x = c;
        }
    }
    for (i, &dim) in spatial.iter().enumerate() {
        if let Some(x) = v.get_mut(dim as usize) {
            *x = char::from_digit(i as u32, 36).unwrap_or('?');
        }
    }
    v.into_iter().collect()
}

// ---------------------------------------------------------------------------------------------
// The module

/// Indexes over a module proto (ids → computations/instructions), sorted as XLA sorts them.
pub struct ModuleView<'p> {
    pub proto: &'p HloModuleProto,
    /// Computations sorted by id.
    pub comps: Vec<&'p HloComputationProto>,
    /// Per computation (same order), instructions sorted by id.
    pub instrs: Vec<Vec<&'p HloInstructionProto>>,
    pub comp_by_id: HashMap<i64, usize>,
    /// instruction id → (computation index, instruction index).
    pub instr_by_id: HashMap<i64, (usize, usize)>,
    pub entry: Option<usize>,
}

impl<'p> ModuleView<'p> {
    pub fn new(proto: &'p HloModuleProto) -> Self {
        let mut comps: Vec<&HloComputationProto> = proto.computations.iter().collect();
        comps.sort_by_key(|c| c.id);
        let mut instrs = Vec::with_capacity(comps.len());
        let mut comp_by_id = HashMap::new();
        let mut instr_by_id = HashMap::new();
        for (ci, c) in comps.iter().enumerate() {
            comp_by_id.insert(c.id, ci);
            // Instructions keep the proto's order (XProf's 2.24.2 output shows XLA does not
            // re-sort them by id); computations are sorted by id.
            let v: Vec<&HloInstructionProto> = c.instructions.iter().collect();
            for (ii, ins) in v.iter().enumerate() {
                instr_by_id.insert(ins.id, (ci, ii));
            }
            instrs.push(v);
        }
        let entry = comps
            .iter()
            .position(|c| c.id == proto.entry_computation_id && proto.entry_computation_id != 0)
            .or_else(|| {
                comps
                    .iter()
                    .position(|c| c.name == proto.entry_computation_name)
            })
            .or_else(|| (!comps.is_empty()).then(|| comps.len() - 1));
        ModuleView {
            proto,
            comps,
            instrs,
            comp_by_id,
            instr_by_id,
            entry,
        }
    }

    pub fn instr(&self, id: i64) -> Option<&'p HloInstructionProto> {
        self.instr_by_id.get(&id).map(|&(c, i)| self.instrs[c][i])
    }

    fn comp_name(&self, id: i64) -> &'p str {
        self.comp_by_id
            .get(&id)
            .map(|&c| self.comps[c].name.as_str())
            .unwrap_or("?")
    }

    /// `HloModule::MakeComputationPostOrder`: for each computation nobody calls (in id order),
    /// its embedded computations in DFS post order, then itself.
    pub fn computation_post_order(&self) -> Vec<usize> {
        let mut called: HashSet<usize> = HashSet::new();
        for list in &self.instrs {
            for ins in list {
                for id in &ins.called_computation_ids {
                    if let Some(&c) = self.comp_by_id.get(id) {
                        called.insert(c);
                    }
                }
            }
        }
        let mut added: HashSet<usize> = HashSet::new();
        let mut order = Vec::with_capacity(self.comps.len());
        for ci in 0..self.comps.len() {
            if called.contains(&ci) {
                continue;
            }
            for e in self.embedded_post_order(ci) {
                if added.insert(e) {
                    order.push(e);
                }
            }
            if added.insert(ci) {
                order.push(ci);
            }
        }
        // Computations only reachable through a cycle (malformed input): keep them visible.
        for ci in 0..self.comps.len() {
            if added.insert(ci) {
                order.push(ci);
            }
        }
        order
    }

    /// `HloComputation::MakeEmbeddedComputationsList`.
    fn embedded_post_order(&self, root: usize) -> Vec<usize> {
        let mut visited: HashSet<usize> = HashSet::new();
        let mut post = Vec::new();
        let mut stack: Vec<(usize, usize)> = Vec::new();
        let push_called = |ins: &HloInstructionProto,
                           visited: &mut HashSet<usize>,
                           stack: &mut Vec<(usize, usize)>| {
            for id in ins.called_computation_ids.iter().rev() {
                if let Some(&c) = self.comp_by_id.get(id)
                    && visited.insert(c)
                {
                    stack.push((c, 0));
                }
            }
        };
        for ins in &self.instrs[root] {
            push_called(ins, &mut visited, &mut stack);
            while let Some(top) = stack.last_mut() {
                let (c, pos) = *top;
                if pos == self.instrs[c].len() {
                    stack.pop();
                    post.push(c);
                } else {
                    top.1 += 1;
                    let next = self.instrs[c][pos];
                    push_called(next, &mut visited, &mut stack);
                }
            }
        }
        post
    }

    /// The order XLA prints a computation's instructions in: the schedule's sequence when
    /// the module schedules it, else the DFS post order.
    pub fn instruction_order(&self, ci: usize) -> Vec<usize> {
        let comp = self.comps[ci];
        let n = self.instrs[ci].len();
        if let Some(seq) = self
            .proto
            .schedule
            .as_ref()
            .and_then(|s| s.sequences.get(&comp.id))
        {
            let order: Vec<usize> = seq
                .instruction_ids
                .iter()
                .filter_map(|id| self.instr_by_id.get(id).filter(|l| l.0 == ci).map(|l| l.1))
                .collect();
            if order.len() == n {
                return order;
            }
        }
        self.post_order(ci)
    }

    /// `HloComputation::MakeInstructionPostOrder`.
    pub fn post_order(&self, ci: usize) -> Vec<usize> {
        let list = &self.instrs[ci];
        let n = list.len();
        let local = |id: i64| self.instr_by_id.get(&id).filter(|l| l.0 == ci).map(|l| l.1);
        let mut has_users = vec![false; n];
        for ins in list {
            for &op in &ins.operand_ids {
                if let Some(o) = local(op) {
                    has_users[o] = true;
                }
            }
        }
        // 0 = unvisited, 1 = visiting, 2 = visited
        let mut state = vec![0u8; n];
        let mut order = Vec::with_capacity(n);
        let mut stack: Vec<usize> = Vec::new();
        for (root, used) in has_users.iter().enumerate() {
            if *used {
                continue;
            }
            stack.clear();
            stack.push(root);
            while let Some(&cur) = stack.last() {
                if state[cur] != 0 {
                    stack.pop();
                    if state[cur] != 2 {
                        state[cur] = 2;
                        order.push(cur);
                    }
                    continue;
                }
                state[cur] = 1;
                let ins = list[cur];
                for &op in ins.operand_ids.iter().rev() {
                    if let Some(o) = local(op) {
                        stack.push(o);
                    }
                }
                for &p in &ins.control_predecessor_ids {
                    if let Some(o) = local(p) {
                        stack.push(o);
                    }
                }
            }
        }
        // Anything unreachable from a user-less instruction (a cycle): append in id order.
        for (i, s) in state.iter().enumerate() {
            if *s != 2 {
                order.push(i);
            }
        }
        order
    }

    fn root_index(&self, ci: usize) -> Option<usize> {
        let comp = self.comps[ci];
        self.instr_by_id
            .get(&comp.root_id)
            .filter(|l| l.0 == ci)
            .map(|l| l.1)
            .or_else(|| self.instrs[ci].len().checked_sub(1))
    }

    /// Operand names (in operand order) and user names (in XLA's user order: the order the
    /// users appear in the computation's proto) of the instruction called `name`.
    pub fn adjacent(&self, name: &str) -> Option<(Vec<String>, Vec<String>)> {
        let (ci, ii) = self
            .instrs
            .iter()
            .enumerate()
            .find_map(|(ci, l)| l.iter().position(|i| i.name == name).map(|ii| (ci, ii)))?;
        let ins = self.instrs[ci][ii];
        let operands = ins
            .operand_ids
            .iter()
            .filter_map(|id| self.instr(*id).map(|o| o.name.clone()))
            .collect();
        let users = self.instrs[ci]
            .iter()
            .filter(|u| u.operand_ids.contains(&ins.id))
            .map(|u| u.name.clone())
            .collect();
        Some((operands, users))
    }

    /// The computation an async op wraps, when it holds nothing but parameters and one root
    /// fed by them in order (XLA's `CanExpandIntoSingleInstruction`).
    fn expandable_async_computation(&self, ci: usize) -> Option<&'p HloInstructionProto> {
        let list = &self.instrs[ci];
        let root = list.get(self.root_index(ci)?)?;
        let params: Vec<&HloInstructionProto> = list
            .iter()
            .copied()
            .filter(|i| i.opcode == "parameter")
            .collect();
        if params.len() + 1 != list.len() || root.opcode == "parameter" {
            return None;
        }
        let mut by_number = params.clone();
        by_number.sort_by_key(|p| p.parameter_number);
        let ids: Vec<i64> = by_number.iter().map(|p| p.id).collect();
        (root.operand_ids == ids).then_some(root)
    }

    /// The instruction an async op wraps, when XLA would print it with syntax sugar.
    fn async_wrapped(&self, ins: &HloInstructionProto) -> Option<&'p HloInstructionProto> {
        if !matches!(
            ins.opcode.as_str(),
            "async-start" | "async-update" | "async-done"
        ) {
            return None;
        }
        let ci = *self.comp_by_id.get(ins.called_computation_ids.first()?)?;
        self.expandable_async_computation(ci)
    }

    fn sugared_async_computations(&self) -> HashSet<usize> {
        self.instrs
            .iter()
            .flatten()
            .filter(|i| self.async_wrapped(i).is_some())
            .filter_map(|i| {
                self.comp_by_id
                    .get(i.called_computation_ids.first()?)
                    .copied()
            })
            .collect()
    }

    /// `HloModule::ToString(options)`.
    pub fn print(&self, opts: &PrintOptions) -> String {
        let mut out = String::with_capacity(64 * 1024);
        self.print_header(&mut out, opts);
        let sugared: HashSet<usize> = self.sugared_async_computations();
        for ci in self.computation_post_order() {
            // With XLA's async syntax sugar the wrapped computation is implied by the
            // `<op>-start`/`-done` instructions and not printed.
            if sugared.contains(&ci) {
                continue;
            }
            if Some(ci) == self.entry {
                out.push_str("ENTRY ");
            }
            self.print_computation(&mut out, ci, opts);
            out.push_str("\n\n");
        }
        out
    }

    fn print_header(&self, out: &mut String, opts: &PrintOptions) {
        let p = self.proto;
        out.push_str("HloModule ");
        out.push_str(&p.name);
        if p.schedule.as_ref().is_some_and(|s| !s.sequences.is_empty()) {
            out.push_str(", is_scheduled=true");
        }
        if let Some(a) = &p.input_output_alias
            && !a.entries.is_empty()
        {
            let entries: Vec<String> = a
                .entries
                .iter()
                .map(|e| {
                    let kind = if e.kind == 2 {
                        "must-alias"
                    } else {
                        "may-alias"
                    };
                    format!(
                        "{}: ({}, {}, {kind})",
                        brace_list(&e.output_shape_index),
                        e.parameter_number,
                        brace_list(&e.parameter_shape_index)
                    )
                })
                .collect();
            let _ = write!(out, ", input_output_alias={{ {} }}", entries.join(", "));
        }
        if let Some(ps) = &p.host_program_shape {
            out.push_str(", entry_computation_layout={(");
            for (i, s) in ps.parameters.iter().enumerate() {
                if i > 0 {
                    if i % 5 == 0 {
                        let _ = write!(out, ", /*index={i}*/");
                    } else {
                        out.push_str(", ");
                    }
                }
                out.push_str(&shape_with_layout(s));
            }
            out.push_str(")->");
            if let Some(r) = &ps.result {
                out.push_str(&shape_with_layout(r));
            }
            out.push('}');
        }
        if let Some(fa) = &p.frontend_attributes
            && !fa.map.is_empty()
        {
            let _ = write!(out, ", frontend_attributes={}", frontend_attrs(&fa.map));
        }
        out.push_str("\n\n");
        if opts.metadata
            && let Some(sf) = &p.stack_frame_index
            && !sf.stack_frames.is_empty()
        {
            out.push_str("FileNames\n");
            for (i, f) in sf.file_names.iter().enumerate() {
                let _ = writeln!(out, "{} \"{}\"", i + 1, c_escape(f));
            }
            out.push_str("\nFunctionNames\n");
            for (i, f) in sf.function_names.iter().enumerate() {
                let _ = writeln!(out, "{} \"{}\"", i + 1, c_escape(f));
            }
            out.push_str("\nFileLocations\n");
            for (i, l) in sf.file_locations.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "{} {{file_name_id={} function_name_id={} line={} column={}}}",
                    i + 1,
                    l.file_name_id,
                    l.function_name_id,
                    l.line,
                    l.column
                );
            }
            out.push_str("\nStackFrames\n");
            for (i, f) in sf.stack_frames.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "{} {{file_location_id={} parent_frame_id={}}}",
                    i + 1,
                    f.file_location_id,
                    f.parent_frame_id
                );
            }
            out.push_str("\n\n");
        }
    }

    /// The computation's signature: `(p0: f32[2], p1: s32[]) -> f32[2]` (shapes without
    /// layout, parameters by number).
    pub fn program_shape(&self, ci: usize) -> String {
        let list = &self.instrs[ci];
        let mut params: Vec<&HloInstructionProto> = list
            .iter()
            .copied()
            .filter(|i| i.opcode == "parameter")
            .collect();
        params.sort_by_key(|p| p.parameter_number);
        let ps: Vec<String> = params
            .iter()
            .map(|p| {
                format!(
                    "{}: {}",
                    p.name,
                    p.shape.as_ref().map(shape_string).unwrap_or_default()
                )
            })
            .collect();
        let result = self
            .root_index(ci)
            .and_then(|r| list[r].shape.as_ref())
            .map(shape_string)
            .unwrap_or_default();
        format!("({}) -> {}", ps.join(", "), result)
    }

    fn print_computation(&self, out: &mut String, ci: usize, opts: &PrintOptions) {
        let comp = self.comps[ci];
        out.push_str(opts.percent());
        out.push_str(&comp.name);
        out.push(' ');
        if opts.style == Style::Long {
            out.push_str(&self.program_shape(ci));
            out.push(' ');
        }
        out.push_str("{\n");
        let root = self.root_index(ci);
        for ii in self.instruction_order(ci) {
            out.push_str("  ");
            if Some(ii) == root {
                out.push_str("ROOT ");
            }
            self.print_instruction(out, self.instrs[ci][ii], opts);
            out.push('\n');
        }
        out.push('}');
        if !comp.execution_thread.is_empty() && comp.execution_thread != "main" {
            let _ = write!(out, ", execution_thread=\"{}\"", comp.execution_thread);
        }
    }

    /// One instruction as XLA prints it (without indentation and `ROOT `).
    pub fn instruction_text(&self, ins: &HloInstructionProto, opts: &PrintOptions) -> String {
        let mut s = String::new();
        self.print_instruction(&mut s, ins, opts);
        s
    }

    fn print_instruction(&self, out: &mut String, ins: &HloInstructionProto, opts: &PrintOptions) {
        let pct = opts.percent();
        let _ = write!(out, "{pct}{} = ", ins.name);
        if let Some(s) = &ins.shape {
            write_shape(out, s, true);
        }
        out.push(' ');
        match self.async_wrapped(ins) {
            Some(w) => {
                out.push_str(&w.opcode);
                out.push_str(match ins.opcode.as_str() {
                    "async-start" => "-start",
                    "async-update" => "-update",
                    _ => "-done",
                });
            }
            None => out.push_str(&ins.opcode),
        }
        out.push('(');
        match ins.opcode.as_str() {
            "parameter" => {
                let _ = write!(out, "{}", ins.parameter_number);
            }
            "constant" => out.push_str(&self.constant_text(ins, opts)),
            _ => {
                for (i, id) in ins.operand_ids.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                        if opts.style == Style::Long && i % 5 == 0 {
                            let _ = write!(out, "/*index={i}*/");
                        }
                    }
                    let operand = self.instr(*id);
                    if opts.operand_shapes
                        && let Some(shape) = operand.and_then(|o| o.shape.as_ref())
                    {
                        write_shape(out, shape, true);
                        out.push(' ');
                    }
                    out.push_str(pct);
                    out.push_str(operand.map(|o| o.name.as_str()).unwrap_or("?"));
                }
            }
        }
        out.push(')');
        let mut attrs: Vec<String> = Vec::new();
        self.extra_attributes(ins, opts, &mut attrs);
        for a in attrs {
            out.push_str(", ");
            out.push_str(&a);
        }
        if opts.metadata
            && let Some(m) = &ins.metadata
        {
            let md = metadata_string(m);
            if !m.op_type.is_empty()
                || !m.op_name.is_empty()
                || !m.source_file.is_empty()
                || !m.scheduling_name.is_empty()
            {
                let _ = write!(out, ", metadata={{{md}}}");
            }
        }
        if opts.backend_config && !ins.backend_config.is_empty() {
            let cfg = String::from_utf8_lossy(&ins.backend_config);
            if lexes_as_json_dict(&cfg) {
                let _ = write!(out, ", backend_config={cfg}");
            } else {
                let _ = write!(out, ", backend_config=\"{}\"", c_escape(&cfg));
            }
        }
    }

    fn constant_text(&self, ins: &HloInstructionProto, opts: &PrintOptions) -> String {
        let Some(shape) = ins.shape.as_ref() else {
            return "{...}".into();
        };
        let elements = shape
            .dimensions
            .iter()
            .try_fold(1i64, |a, &d| a.checked_mul(d.max(0)));
        let small = is_array(shape) && elements.is_some_and(|e| e <= 10);
        if !(small || opts.style == Style::Long) || !is_array(shape) {
            return "{...}".into();
        }
        ins.literal
            .as_ref()
            .and_then(|l| literal_oneline(l, shape))
            .unwrap_or_else(|| "{...}".into())
    }

    fn operand_type(&self, ins: &HloInstructionProto, k: usize) -> Option<i32> {
        ins.operand_ids
            .get(k)
            .and_then(|id| self.instr(*id))
            .and_then(|o| o.shape.as_ref())
            .map(|s| s.element_type)
    }

    fn called(&self, ins: &HloInstructionProto, k: usize) -> String {
        ins.called_computation_ids
            .get(k)
            .map(|id| self.comp_name(*id).to_string())
            .unwrap_or_else(|| "?".into())
    }

    /// `PrintExtraAttributes`: the opcode's own attributes, then called computations,
    /// sharding, frontend attributes and control predecessors.
    fn extra_attributes(
        &self,
        ins: &HloInstructionProto,
        opts: &PrintOptions,
        a: &mut Vec<String>,
    ) {
        if let Some(wrapped) = self.async_wrapped(ins) {
            // `<op>-start(...)` carries the wrapped op's attributes (and a non-main thread).
            if ins.opcode == "async-start"
                && !ins.async_execution_thread.is_empty()
                && ins.async_execution_thread != "main"
            {
                a.push(format!(
                    "async_execution_thread=\"{}\"",
                    ins.async_execution_thread
                ));
            }
            self.extra_attributes(wrapped, opts, a);
            self.common_attributes(ins, opts, a);
            return;
        }
        self.opcode_attributes(ins, opts, a);
        self.common_attributes(ins, opts, a);
    }

    /// The opcode's own attributes and its called computations (`PrintExtraAttributesImpl`
    /// plus the subcomputation names).
    fn opcode_attributes(
        &self,
        ins: &HloInstructionProto,
        opts: &PrintOptions,
        a: &mut Vec<String>,
    ) {
        let pct = opts.percent();
        let op = ins.opcode.as_str();
        let dims = || format!("dimensions={}", brace_list(&ins.dimensions));
        match op {
            "map" if !ins.dimensions.is_empty() => a.push(dims()),
            "broadcast" | "transpose" | "reverse" | "reduce" | "concatenate" | "all-gather"
            | "all-gather-start" | "reduce-scatter" | "get-dimension-size"
            | "set-dimension-size" => a.push(dims()),
            "sort" => {
                a.push(dims());
                if ins.is_stable {
                    a.push("is_stable=true".into());
                }
            }
            "all-to-all" if !ins.dimensions.is_empty() => a.push(dims()),
            "get-tuple-element" => a.push(format!("index={}", ins.tuple_index)),
            "iota" => a.push(format!(
                "iota_dimension={}",
                ins.dimensions.first().copied().unwrap_or(0)
            )),
            "slice" => {
                let parts: Vec<String> = ins
                    .slice_dimensions
                    .iter()
                    .map(|d| {
                        if d.stride == 1 {
                            format!("[{}:{}]", d.start, d.limit)
                        } else {
                            format!("[{}:{}:{}]", d.start, d.limit, d.stride)
                        }
                    })
                    .collect();
                a.push(format!("slice={{{}}}", parts.join(", ")));
            }
            "fusion" => {
                let kind = if ins.fusion_kind.is_empty() {
                    "kLoop"
                } else {
                    &ins.fusion_kind
                };
                a.push(format!("kind={kind}"));
            }
            "compare" => {
                a.push(format!("direction={}", ins.comparison_direction));
                if !ins.comparison_type.is_empty() {
                    let default = match self
                        .operand_type(ins, 0)
                        .and_then(|t| PrimitiveType::try_from(t).ok())
                    {
                        Some(
                            PrimitiveType::F16
                            | PrimitiveType::F32
                            | PrimitiveType::F64
                            | PrimitiveType::Bf16
                            | PrimitiveType::C64
                            | PrimitiveType::C128,
                        ) => "FLOAT",
                        Some(
                            PrimitiveType::S8
                            | PrimitiveType::S16
                            | PrimitiveType::S32
                            | PrimitiveType::S64
                            | PrimitiveType::S4
                            | PrimitiveType::S2,
                        ) => "SIGNED",
                        Some(_) => "UNSIGNED",
                        None => "",
                    };
                    if !ins.comparison_type.eq_ignore_ascii_case(default) {
                        a.push(format!("type={}", ins.comparison_type.to_ascii_uppercase()));
                    }
                }
            }
            "dot" | "ragged-dot" => {
                if let Some(d) = &ins.dot_dimension_numbers {
                    if !d.lhs_batch_dimensions.is_empty() {
                        a.push(format!(
                            "lhs_batch_dims={}",
                            brace_list(&d.lhs_batch_dimensions)
                        ));
                    }
                    a.push(format!(
                        "lhs_contracting_dims={}",
                        brace_list(&d.lhs_contracting_dimensions)
                    ));
                    if !d.rhs_batch_dimensions.is_empty() {
                        a.push(format!(
                            "rhs_batch_dims={}",
                            brace_list(&d.rhs_batch_dimensions)
                        ));
                    }
                    a.push(format!(
                        "rhs_contracting_dims={}",
                        brace_list(&d.rhs_contracting_dimensions)
                    ));
                }
                self.precision(ins, a);
            }
            "convolution" => {
                if let Some(w) = &ins.window
                    && !w.dimensions.is_empty()
                {
                    a.push(format!("window={{{}}}", window_string(w)));
                }
                if let Some(d) = &ins.convolution_dimension_numbers {
                    a.push(format!("dim_labels={}", conv_dim_labels(d)));
                }
                if ins.feature_group_count > 1 {
                    a.push(format!("feature_group_count={}", ins.feature_group_count));
                }
                if ins.batch_group_count > 1 {
                    a.push(format!("batch_group_count={}", ins.batch_group_count));
                }
                self.precision(ins, a);
            }
            "reduce-window" | "select-and-scatter" => {
                if let Some(w) = &ins.window {
                    a.push(format!("window={{{}}}", window_string(w)));
                }
            }
            "pad" => {
                if let Some(pc) = &ins.padding_config {
                    let interior = pc.dimensions.iter().any(|d| d.interior_padding != 0);
                    let parts: Vec<String> = pc
                        .dimensions
                        .iter()
                        .map(|d| {
                            if interior {
                                format!(
                                    "{}_{}_{}",
                                    d.edge_padding_low, d.edge_padding_high, d.interior_padding
                                )
                            } else {
                                format!("{}_{}", d.edge_padding_low, d.edge_padding_high)
                            }
                        })
                        .collect();
                    a.push(format!("padding={}", parts.join("x")));
                }
            }
            "dynamic-slice" => a.push(format!(
                "dynamic_slice_sizes={}",
                brace_list(&ins.dynamic_slice_sizes)
            )),
            "reduce-precision" => {
                a.push(format!("exponent_bits={}", ins.exponent_bits));
                a.push(format!("mantissa_bits={}", ins.mantissa_bits));
            }
            "reshape" => {
                if let Some(d) = ins.dimensions.first()
                    && *d != -1
                {
                    a.push(format!("inferred_dimension={d}"));
                }
            }
            "gather" => {
                if let Some(g) = &ins.gather_dimension_numbers {
                    let mut parts = vec![
                        format!("offset_dims={}", brace_list(&g.offset_dims)),
                        format!(
                            "collapsed_slice_dims={}",
                            brace_list(&g.collapsed_slice_dims)
                        ),
                        format!("start_index_map={}", brace_list(&g.start_index_map)),
                    ];
                    if !g.operand_batching_dims.is_empty() {
                        parts.push(format!(
                            "operand_batching_dims={}",
                            brace_list(&g.operand_batching_dims)
                        ));
                    }
                    if !g.start_indices_batching_dims.is_empty() {
                        parts.push(format!(
                            "start_indices_batching_dims={}",
                            brace_list(&g.start_indices_batching_dims)
                        ));
                    }
                    parts.push(format!("index_vector_dim={}", g.index_vector_dim));
                    a.extend(parts);
                }
                a.push(format!(
                    "slice_sizes={}",
                    brace_list(&ins.gather_slice_sizes)
                ));
                if ins.indices_are_sorted {
                    a.push("indices_are_sorted=true".into());
                }
            }
            "scatter" => {
                if let Some(s) = &ins.scatter_dimension_numbers {
                    a.push(format!(
                        "update_window_dims={}",
                        brace_list(&s.update_window_dims)
                    ));
                    a.push(format!(
                        "inserted_window_dims={}",
                        brace_list(&s.inserted_window_dims)
                    ));
                    a.push(format!(
                        "scatter_dims_to_operand_dims={}",
                        brace_list(&s.scatter_dims_to_operand_dims)
                    ));
                    if !s.input_batching_dims.is_empty() {
                        a.push(format!(
                            "input_batching_dims={}",
                            brace_list(&s.input_batching_dims)
                        ));
                    }
                    if !s.scatter_indices_batching_dims.is_empty() {
                        a.push(format!(
                            "scatter_indices_batching_dims={}",
                            brace_list(&s.scatter_indices_batching_dims)
                        ));
                    }
                    a.push(format!("index_vector_dim={}", s.index_vector_dim));
                }
                if ins.indices_are_sorted {
                    a.push("indices_are_sorted=true".into());
                }
                if ins.unique_indices {
                    a.push("unique_indices=true".into());
                }
            }
            "custom-call" => {
                // XLA's order (`HloCustomCallInstruction::PrintExtraAttributesImpl`): the
                // convolution attributes, then the target.
                if let Some(w) = &ins.window
                    && !w.dimensions.is_empty()
                {
                    a.push(format!("window={{{}}}", window_string(w)));
                }
                if let Some(d) = &ins.convolution_dimension_numbers {
                    a.push(format!("dim_labels={}", conv_dim_labels(d)));
                }
                if ins.feature_group_count > 1 {
                    a.push(format!("feature_group_count={}", ins.feature_group_count));
                }
                if ins.batch_group_count > 1 {
                    a.push(format!("batch_group_count={}", ins.batch_group_count));
                }
                self.precision(ins, a);
                a.push(format!(
                    "custom_call_target=\"{}\"",
                    c_escape(&ins.custom_call_target)
                ));
                if ins.constrain_layout {
                    let shapes: Vec<String> = ins
                        .operand_shapes_with_layout
                        .iter()
                        .map(shape_with_layout)
                        .collect();
                    a.push(format!(
                        "operand_layout_constraints={{{}}}",
                        shapes.join(", ")
                    ));
                }
                if ins.custom_call_has_side_effect {
                    a.push("custom_call_has_side_effect=true".into());
                }
                self.output_operand_aliasing(ins, a);
                if ins.custom_call_schedule != 0 {
                    let s = match ins.custom_call_schedule {
                        1 => "SCHEDULE_LATEST",
                        2 => "SCHEDULE_EARLIEST",
                        _ => "SCHEDULE_NONE",
                    };
                    a.push(format!("schedule={s}"));
                }
                if ins.custom_call_api_version > 1 {
                    let v = match ins.custom_call_api_version {
                        2 => "API_VERSION_STATUS_RETURNING",
                        3 => "API_VERSION_STATUS_RETURNING_UNIFIED",
                        4 => "API_VERSION_TYPED_FFI",
                        _ => "API_VERSION_UNSPECIFIED",
                    };
                    a.push(format!("api_version={v}"));
                }
            }
            "rng" => {
                let d = match ins.distribution {
                    1 => "rng_uniform",
                    2 => "rng_normal",
                    _ => "rng_invalid",
                };
                a.push(format!("distribution={d}"));
            }
            "rng-bit-generator" => {
                let alg = match ins.rng_algorithm {
                    1 => "rng_three_fry",
                    2 => "rng_philox",
                    _ => "rng_default",
                };
                a.push(format!("algorithm={alg}"));
            }
            "rng-get-and-update-state" => a.push(format!("delta={}", ins.delta)),
            "batch-norm-training" | "batch-norm-inference" | "batch-norm-grad" => {
                a.push(format!("epsilon={}", format_g(ins.epsilon as f64, 9)));
                a.push(format!("feature_index={}", ins.feature_index));
            }
            "topk" => {
                a.push(format!("k={}", ins.k));
                if ins.largest {
                    a.push("largest=true".into());
                }
            }
            _ => {}
        }
        // Collectives and channels.
        if ins.channel_id > 0
            && matches!(
                op,
                "all-reduce"
                    | "all-reduce-start"
                    | "all-gather"
                    | "all-gather-start"
                    | "all-to-all"
                    | "reduce-scatter"
                    | "collective-permute"
                    | "collective-permute-start"
                    | "collective-broadcast"
                    | "send"
                    | "recv"
                    | "send-done"
                    | "recv-done"
            )
        {
            a.push(format!("channel_id={}", ins.channel_id));
        }
        if matches!(
            op,
            "all-reduce"
                | "all-reduce-start"
                | "all-gather"
                | "all-gather-start"
                | "all-to-all"
                | "reduce-scatter"
                | "collective-broadcast"
        ) {
            if let Some(g) = replica_groups_string(ins) {
                a.push(format!("replica_groups={g}"));
            }
            if ins.constrain_layout {
                a.push("constrain_layout=true".into());
            }
            if ins.use_global_device_ids {
                a.push("use_global_device_ids=true".into());
            }
        }
        if matches!(op, "collective-permute" | "collective-permute-start") {
            let pairs: Vec<String> = ins
                .source_target_pairs
                .iter()
                .map(|p| format!("{{{},{}}}", p.source, p.target))
                .collect();
            a.push(format!("source_target_pairs={{{}}}", pairs.join(",")));
        }
        if matches!(op, "send" | "recv" | "send-done" | "recv-done") && ins.is_host_transfer {
            a.push("is_host_transfer=true".into());
        }
        if op == "fusion" {
            self.output_operand_aliasing(ins, a);
        }
        // Called computations (kNameOnly).
        let comps = &ins.called_computation_ids;
        let name = |k: usize| format!("{pct}{}", self.called(ins, k));
        match op {
            "while" => {
                // called_computations = [body, condition]
                if comps.len() >= 2 {
                    a.push(format!("condition={}", name(1)));
                    a.push(format!("body={}", name(0)));
                }
            }
            "select-and-scatter" => {
                if comps.len() >= 2 {
                    a.push(format!("select={}", name(0)));
                    a.push(format!("scatter={}", name(1)));
                }
            }
            "conditional" => {
                let pred = self.operand_type(ins, 0) == Some(PrimitiveType::Pred as i32);
                if pred && comps.len() == 2 {
                    a.push(format!("true_computation={}", name(0)));
                    a.push(format!("false_computation={}", name(1)));
                } else {
                    let names: Vec<String> = (0..comps.len()).map(name).collect();
                    a.push(format!("branch_computations={{{}}}", names.join(", ")));
                }
            }
            "call" | "map" | "reduce-window" | "reduce" | "all-reduce" | "reduce-scatter"
            | "all-reduce-start" | "scatter" | "topk" | "sort" => {
                if !comps.is_empty() {
                    a.push(format!("to_apply={}", name(0)));
                }
            }
            "custom-call" => {
                if !comps.is_empty() {
                    let names: Vec<String> = (0..comps.len()).map(name).collect();
                    a.push(format!("called_computations={{{}}}", names.join(", ")));
                }
            }
            _ => {
                if !comps.is_empty() {
                    let names: Vec<String> = (0..comps.len()).map(name).collect();
                    a.push(format!("calls={}", names.join(", ")));
                }
            }
        }
    }

    /// Sharding, frontend attributes and control predecessors, which every instruction prints.
    fn common_attributes(
        &self,
        ins: &HloInstructionProto,
        opts: &PrintOptions,
        a: &mut Vec<String>,
    ) {
        let pct = opts.percent();
        if let Some(s) = &ins.sharding {
            a.push(format!("sharding={}", sharding_string(s)));
        }
        if let Some(fa) = &ins.frontend_attributes
            && !fa.map.is_empty()
        {
            a.push(format!("frontend_attributes={}", frontend_attrs(&fa.map)));
        }
        if opts.style == Style::Long && !ins.control_predecessor_ids.is_empty() {
            let names: Vec<String> = ins
                .control_predecessor_ids
                .iter()
                .map(|id| {
                    format!(
                        "{pct}{}",
                        self.instr(*id).map(|i| i.name.as_str()).unwrap_or("?")
                    )
                })
                .collect();
            a.push(format!("control-predecessors={{{}}}", names.join(", ")));
        }
    }

    fn precision(&self, ins: &HloInstructionProto, a: &mut Vec<String>) {
        if let Some(pc) = &ins.precision_config
            && pc.operand_precision.iter().any(|&p| p != 0)
        {
            let names: Vec<&str> = pc
                .operand_precision
                .iter()
                .map(|&p| PRECISION.get(p as usize).copied().unwrap_or("default"))
                .collect();
            a.push(format!("operand_precision={{{}}}", names.join(",")));
        }
    }

    fn output_operand_aliasing(&self, ins: &HloInstructionProto, a: &mut Vec<String>) {
        if ins.output_operand_aliasing.is_empty() {
            return;
        }
        let parts: Vec<String> = ins
            .output_operand_aliasing
            .iter()
            .map(|o| {
                format!(
                    "{}: ({}, {})",
                    brace_list(&o.output_shape_index),
                    o.operand_index,
                    brace_list(&o.operand_shape_index)
                )
            })
            .collect();
        a.push(format!(
            "output_to_operand_aliasing={{{}}}",
            parts.join(", ")
        ));
    }
}

fn frontend_attrs(map: &std::collections::BTreeMap<String, String>) -> String {
    let parts: Vec<String> = map
        .iter()
        .map(|(k, v)| {
            if lexes_as_json_dict(v) {
                format!("{k}={v}")
            } else {
                format!("{k}=\"{v}\"")
            }
        })
        .collect();
    format!("{{{}}}", parts.join(","))
}

/// Print a module proto as XLA would.
pub fn print_module(proto: &HloModuleProto, opts: &PrintOptions) -> String {
    ModuleView::new(proto).print(opts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_g_matches_c() {
        assert_eq!(
            format_g(f32::from_bits(0x34b84b36) as f64, 9),
            "3.43273939e-07"
        );
        assert_eq!(format_g(0.00021858087f32 as f64, 9), "0.00021858087");
        assert_eq!(format_g(-0.99999994f32 as f64, 9), "-0.99999994");
        assert_eq!(format_g(-0.0078125, 9), "-0.0078125");
        assert_eq!(format_g(2.0, 9), "2");
        assert_eq!(format_g(1e10, 9), "1e+10");
        assert_eq!(format_g(123456789.0, 9), "123456789");
        assert_eq!(format_g(f64::NEG_INFINITY, 9), "-inf");
    }

    #[test]
    fn element_widths() {
        use PrimitiveType as P;
        let bits = |t: P| element_bits(t as i32);
        assert_eq!(
            [
                P::Pred,
                P::S4,
                P::F4e2m1fn,
                P::U1,
                P::Bf16,
                P::F8e4m3fn,
                P::C64,
                P::C128
            ]
            .map(bits),
            [8, 4, 4, 1, 16, 8, 64, 128]
        );
        assert_eq!([P::Tuple, P::Token, P::OpaqueType].map(bits), [0, 0, 0]);
    }

    #[test]
    fn convolution_dim_labels_like_xla() {
        let nhwc = xprof_proto::xla::ConvolutionDimensionNumbers {
            input_batch_dimension: 0,
            input_feature_dimension: 3,
            input_spatial_dimensions: vec![1, 2],
            kernel_input_feature_dimension: 2,
            kernel_output_feature_dimension: 3,
            kernel_spatial_dimensions: vec![0, 1],
            output_batch_dimension: 0,
            output_feature_dimension: 3,
            output_spatial_dimensions: vec![1, 2],
        };
        assert_eq!(conv_dim_labels(&nhwc), "b01f_01io->b01f");
        // Out-of-range dimensions leave a `?`, later assignments win.
        let odd = xprof_proto::xla::ConvolutionDimensionNumbers {
            input_batch_dimension: 7,
            input_feature_dimension: 1,
            input_spatial_dimensions: vec![1],
            output_feature_dimension: -1,
            ..nhwc
        };
        assert_eq!(conv_dim_labels(&odd), "?0?_01io->b01?");
    }

    #[test]
    fn escapes_like_absl() {
        assert_eq!(c_escape("params[0]['b']"), "params[0][\\'b\\']");
        assert_eq!(c_escape("a\"b\n"), "a\\\"b\\n");
    }
}

#[cfg(test)]
mod async_tests {
    use super::*;
    use xprof_proto::xla::{HloComputationProto, HloInstructionProto, HloModuleProto, ShapeProto};

    fn shape() -> Option<ShapeProto> {
        Some(ShapeProto {
            element_type: PrimitiveType::F32 as i32,
            dimensions: vec![4],
            ..Default::default()
        })
    }

    fn ins(id: i64, name: &str, op: &str, operands: Vec<i64>) -> HloInstructionProto {
        HloInstructionProto {
            id,
            name: name.into(),
            opcode: op.into(),
            shape: shape(),
            operand_ids: operands,
            ..Default::default()
        }
    }

    /// An async op wrapping one instruction prints as `<op>-start`/`-done` with the wrapped
    /// op's attributes, and its wrapped computation is not printed.
    #[test]
    fn async_syntax_sugar() {
        let wrapped = HloComputationProto {
            id: 1,
            name: "wrapped_negate".into(),
            root_id: 2,
            instructions: vec![
                HloInstructionProto {
                    parameter_number: 0,
                    ..ins(1, "p", "parameter", vec![])
                },
                ins(2, "neg", "negate", vec![1]),
            ],
            ..Default::default()
        };
        let mut start = ins(11, "negate-start", "async-start", vec![10]);
        start.called_computation_ids = vec![1];
        start.shape = Some(ShapeProto {
            element_type: PrimitiveType::Tuple as i32,
            tuple_shapes: vec![shape().unwrap(), shape().unwrap()],
            ..Default::default()
        });
        let mut done = ins(12, "negate-done", "async-done", vec![11]);
        done.called_computation_ids = vec![1];
        let entry = HloComputationProto {
            id: 2,
            name: "main".into(),
            root_id: 12,
            instructions: vec![
                HloInstructionProto {
                    parameter_number: 0,
                    ..ins(10, "x", "parameter", vec![])
                },
                start,
                done,
            ],
            ..Default::default()
        };
        let m = HloModuleProto {
            name: "m".into(),
            entry_computation_id: 2,
            computations: vec![wrapped, entry],
            ..Default::default()
        };
        let text = print_module(&m, &PrintOptions::short());
        assert!(!text.contains("wrapped_negate {"), "{text}");
        assert!(
            text.contains("negate-start = (f32[4], f32[4]) negate-start(x)\n"),
            "{text}"
        );
        assert!(
            text.contains("ROOT negate-done = f32[4] negate-done(negate-start)\n"),
            "{text}"
        );
    }
}
