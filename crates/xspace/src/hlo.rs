//! HLO modules embedded in a capture: `/host:metadata` event metadata carrying an `Hlo Proto`
//! bytes stat (spec §2.1). JAX captures have only these (no `*.hlo_proto.pb` files), and we
//! never write those files into the run directory: modules are read in memory.
//!
//! Rules (XProf's extraction): program id = the metadata's `program_id` stat, else its id; the
//! display name is `<module name>(<program id>)`; entries are deduplicated by program id, then
//! by display name, the first (by metadata key) winning; a module without a name (or named
//! `NO_MODULE`) is skipped.

use crate::{XSpace, names};
use prost::Message;
use xprof_proto::xla::HloProto;

/// One HLO module found in `/host:metadata`.
#[derive(Clone, Debug)]
pub struct EmbeddedModule<'a> {
    /// The program id (u64; program fingerprints use all 64 bits).
    pub program_id: u64,
    /// `HloModuleProto.name` (without the `(<program id>)` suffix).
    pub name: String,
    /// The event metadata key it was found under.
    pub metadata_id: i64,
    /// The serialized `xla.HloProto`, borrowed from the capture.
    pub bytes: &'a [u8],
}

impl EmbeddedModule<'_> {
    /// `<name>(<program_id>)`, the name XProf gives the module (and its `.hlo_proto.pb` file).
    pub fn display_name(&self) -> String {
        format!("{}({})", self.name, self.program_id)
    }
    /// Decode the full `xla.HloProto`.
    pub fn decode(&self) -> Result<HloProto, prost::DecodeError> {
        HloProto::decode(self.bytes)
    }
    /// Decode only its `hlo_module` ([`xprof_proto::decode_hlo_module`]).
    pub fn decode_module(
        &self,
    ) -> Result<Option<xprof_proto::xla::HloModuleProto>, prost::DecodeError> {
        xprof_proto::decode_hlo_module(self.bytes)
    }
}

/// `HloProto.hlo_module.name`, read straight off the wire (no full decode). `None` when the
/// bytes are not a well-formed HloProto prefix.
pub fn hlo_module_name(bytes: &[u8]) -> Option<String> {
    use crate::wire::{Fields, Value};
    let mut name = None;
    for f in Fields::new(bytes, 0, bytes.len()) {
        let f = f.ok()?;
        if let (1, Value::Len(s, e)) = (f.number, f.value) {
            // Repeated occurrences of a message field merge: the last name wins.
            for g in Fields::new(bytes, s, e) {
                let g = g.ok()?;
                if let (1, Value::Len(a, b)) = (g.number, g.value) {
                    name = Some(std::str::from_utf8(&bytes[a..b]).ok()?.to_string());
                }
            }
        }
    }
    name
}

/// The HLO modules embedded in `space`, in metadata-key order, deduplicated.
pub fn embedded_hlo_modules(space: &XSpace) -> Vec<EmbeddedModule<'_>> {
    let mut out: Vec<EmbeddedModule<'_>> = Vec::new();
    for plane in space
        .planes()
        .filter(|p| p.name() == names::plane::HOST_METADATA)
    {
        for m in plane.event_metadata_iter() {
            let Some(bytes) = m.stat(names::stat::HLO_PROTO).and_then(|s| s.bytes()) else {
                continue;
            };
            // `NO_MODULE` is XProf's placeholder for "no HLO", never a module.
            let Some(name) = hlo_module_name(bytes).filter(|n| !n.is_empty() && n != "NO_MODULE")
            else {
                continue;
            };
            let program_id = m
                .stat(names::stat::PROGRAM_ID)
                .and_then(|s| s.uint())
                .unwrap_or(m.key() as u64);
            let module = EmbeddedModule {
                program_id,
                name,
                metadata_id: m.key(),
                bytes,
            };
            if out.iter().any(|o| {
                o.program_id == module.program_id || o.display_name() == module.display_name()
            }) {
                continue;
            }
            out.push(module);
        }
    }
    out
}
