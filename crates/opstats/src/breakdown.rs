//! `memory_access_breakdown` (an XLA Ops metadata stat carrying XProf's
//! `MemoryAccessBreakdown` proto, `plugin/xprof/protobuf/op_metrics.proto`).

use crate::metrics::{AccessKind, MemoryAccessed};
use crate::model::{StatKey, Stats};

#[derive(Clone, PartialEq, prost::Message)]
struct MemoryAccessedProto {
    #[prost(int32, tag = "1")]
    operation_type: i32,
    #[prost(uint64, tag = "2")]
    memory_space: u64,
    #[prost(uint64, tag = "3")]
    bytes_accessed: u64,
}

#[derive(Clone, PartialEq, prost::Message)]
struct MemoryAccessBreakdownProto {
    #[prost(message, repeated, tag = "1")]
    memory_accessed: Vec<MemoryAccessedProto>,
}

/// Decode the breakdown; an absent or undecodable stat gives an empty breakdown (then all
/// bytes count as HBM, as in XProf).
pub fn decode(bytes: &[u8]) -> Vec<MemoryAccessed> {
    use prost::Message;
    MemoryAccessBreakdownProto::decode(bytes)
        .map(|b| {
            b.memory_accessed
                .into_iter()
                .map(|m| MemoryAccessed {
                    kind: AccessKind::from_proto(m.operation_type),
                    memory_space: m.memory_space,
                    bytes: m.bytes_accessed,
                })
                .collect()
        })
        .unwrap_or_default()
}

pub fn from_stats(s: &Stats) -> Vec<MemoryAccessed> {
    s.get(StatKey::MemoryAccessBreakdown)
        .and_then(|v| v.as_bytes())
        .map(decode)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn decodes_read_write_entries() {
        let p = MemoryAccessBreakdownProto {
            memory_accessed: vec![
                MemoryAccessedProto {
                    operation_type: 1,
                    memory_space: 1,
                    bytes_accessed: 64,
                },
                MemoryAccessedProto {
                    operation_type: 2,
                    memory_space: 3,
                    bytes_accessed: 8,
                },
            ],
        };
        let v = decode(&p.encode_to_vec());
        assert_eq!(v.len(), 2);
        assert_eq!(
            (v[0].kind, v[0].memory_space, v[0].bytes),
            (AccessKind::Read, 1, 64)
        );
        assert_eq!(
            (v[1].kind, v[1].memory_space, v[1].bytes),
            (AccessKind::Write, 3, 8)
        );
        assert!(decode(&[0xff, 0xff]).is_empty());
    }
}
