//! The VLIW bundle listing (`*-final_bundles.txt`).
//!
//! Grammar: `<ws><addr><ws>[<CT>]:<ws>[> …]{ <instr> ( ;; <instr> )* }[ /* comment */]`, one
//! bundle per logical line. Comments may span lines, and continuation lines may start in
//! column 0 (`hlo: <name>` does). A legend block (`= control target key start` … `end`)
//! precedes the bundles.

use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;
use serde::Serialize;

use crate::{LloError, Result};

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Bundle {
    pub address: u64,
    /// Control-target marker before the colon (`LB`, `PF`, …).
    pub ct_marker: Option<String>,
    /// Number of `>` loop-nesting markers.
    pub loop_depth: u32,
    /// Everything after the colon; continuation lines joined by one space.
    pub text: String,
    /// The `hlo: <name>` attribution written in this bundle, if any.
    pub hlo: Option<String>,
    /// `Start region 2`, `End empty region 7`, … from the comments.
    pub regions: Vec<String>,
    /// 1-based line of the bundle's first line in the file.
    pub line: usize,
}

impl Bundle {
    /// The bundle text without its `/* … */` comments (which nest in libtpu's printing:
    /// `/* BoundsCheck … /*hbm=*/%s0 … */`).
    pub fn instruction_text(&self) -> String {
        strip_comments(&self.text)
    }
}

/// Remove `/* … */` comments, honouring nesting. Uses substring search (not a byte loop):
/// it runs over whole listings.
pub fn strip_comments(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let mut depth = 0usize;
    while i < s.len() {
        if depth == 0 {
            match s[i..].find("/*") {
                Some(k) => {
                    out.push_str(&s[i..i + k]);
                    i += k + 2;
                    depth = 1;
                }
                None => {
                    out.push_str(&s[i..]);
                    break;
                }
            }
        } else {
            let open = s[i..].find("/*");
            let close = s[i..].find("*/");
            match (open, close) {
                (Some(o), Some(c)) if o < c => {
                    depth += 1;
                    i += o + 2;
                }
                (_, Some(c)) => {
                    depth -= 1;
                    i += c + 2;
                }
                // An unclosed comment runs to the end.
                (_, None) => break,
            }
        }
    }
    out
}

static HLO_RE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"hlo: ([^\s*/]+)").unwrap());
static REGION_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?:Start|End)(?: empty)? region \d+").unwrap());

/// The parsed listing.
#[derive(Clone, Debug, Default)]
pub struct Listing {
    pub bundles: Vec<Bundle>,
    /// The legend's `LB: loop body` entries.
    pub legend: Vec<(String, String)>,
}

impl Listing {
    /// HLO attribution per bundle, carried forward from the last explicit `hlo:` (bundles
    /// before the first attribution have none).
    pub fn hlo_carried(&self) -> Vec<Option<&str>> {
        let mut last: Option<&str> = None;
        self.bundles
            .iter()
            .map(|b| {
                if let Some(h) = &b.hlo {
                    last = Some(h.as_str());
                }
                last
            })
            .collect()
    }

    /// Whether bundle addresses are exactly 0..n (row i of the utilization matrix is then
    /// bundle i).
    pub fn addresses_are_dense(&self) -> bool {
        self.bundles
            .iter()
            .enumerate()
            .all(|(i, b)| b.address == i as u64)
    }
}

fn parse_addr(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// A bundle's first line: `<ws><addr><ws>[<CT>]:<rest>` → (address, CT marker, rest). Hand
/// parsed: this runs on every line of multi-megabyte listings.
fn bundle_start(line: &str) -> Option<(u64, Option<&str>, &str)> {
    let t = line.trim_start();
    let tok_end = t
        .find(|c: char| !c.is_ascii_alphanumeric())
        .unwrap_or(t.len());
    let addr = parse_addr(&t[..tok_end])?;
    let mut rest = t[tok_end..].trim_start();
    let mut ct = None;
    let b = rest.as_bytes();
    if b.len() >= 2 && b[0].is_ascii_uppercase() && b[1].is_ascii_uppercase() {
        ct = Some(&rest[..2]);
        rest = rest[2..].trim_start();
    }
    let rest = rest.strip_prefix(':')?;
    Some((addr, ct, rest.trim()))
}

fn finish(b: &mut Bundle) {
    if b.text.contains("hlo: ") {
        b.hlo = HLO_RE.captures(&b.text).map(|c| c[1].to_string());
    }
    if b.text.contains(" region ") {
        b.regions = REGION_RE
            .find_iter(&b.text)
            .map(|m| m.as_str().to_string())
            .collect();
    }
    b.loop_depth = b
        .text
        .chars()
        .take_while(|c| *c == '>' || *c == ' ')
        .filter(|c| *c == '>')
        .count() as u32;
}

/// Parse a bundle listing. Lines before the first bundle that are not part of the legend
/// are ignored; a file with no bundle at all is malformed.
pub fn parse(text: &str, path: &Path) -> Result<Listing> {
    let mut out = Listing::default();
    let mut in_legend = false;
    let mut cur: Option<Bundle> = None;
    for (i, line) in text.lines().enumerate() {
        if line.starts_with("= control target key start") {
            in_legend = true;
            continue;
        }
        if in_legend {
            if line.starts_with("= control target key end") {
                in_legend = false;
            } else if let Some((k, v)) = line.split_once(':') {
                out.legend
                    .push((k.trim().to_string(), v.trim().to_string()));
            }
            continue;
        }
        if let Some((addr, ct, rest)) = bundle_start(line) {
            // A bundle opens with `{` (possibly after `>` markers); anything else that looks
            // like `<n> :` is continuation text.
            if rest.trim_start_matches(['>', ' ']).starts_with('{') {
                if let Some(mut b) = cur.take() {
                    finish(&mut b);
                    out.bundles.push(b);
                }
                cur = Some(Bundle {
                    address: addr,
                    ct_marker: ct.map(str::to_string),
                    loop_depth: 0,
                    text: rest.to_string(),
                    hlo: None,
                    regions: Vec::new(),
                    line: i + 1,
                });
                continue;
            }
        }
        if let Some(b) = cur.as_mut() {
            let t = line.trim();
            if !t.is_empty() {
                b.text.push(' ');
                b.text.push_str(t);
            }
        }
    }
    if let Some(mut b) = cur.take() {
        finish(&mut b);
        out.bundles.push(b);
    }
    if out.bundles.is_empty() {
        return Err(LloError::Malformed {
            path: path.to_path_buf(),
            line: None,
            message: "no bundle lines (`<addr> : { … }`) found in this bundle listing".into(),
        });
    }
    Ok(out)
}

/// Parse `address_range`: `0x<lo>-0x<hi>` or one address, both ends inclusive. Hex needs
/// the `0x` prefix; the only bare number accepted is `0` (bundle 0 prints that way).
pub fn parse_address_range(s: &str) -> Result<(u64, u64)> {
    let t: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    let bad = |why: &str| LloError::InvalidArg {
        arg: "address_range",
        message: format!("{s:?}: {why}; expected `0x<lo>-0x<hi>` or a single `0x<addr>`"),
    };
    let one = |p: &str| -> Result<u64> {
        if let Some(h) = p.strip_prefix("0x").or_else(|| p.strip_prefix("0X")) {
            u64::from_str_radix(h, 16).map_err(|_| bad("not a hex address"))
        } else if p == "0" {
            // Bundle 0 prints as `0`; any other bare number is ambiguous (XProf's CLI reads
            // `10` as hex 0x10), so it must carry the prefix.
            Ok(0)
        } else if !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()) {
            Err(bad(
                "a bare number is ambiguous (hex or decimal?); write it with the 0x prefix",
            ))
        } else {
            Err(bad("hex addresses need the 0x prefix"))
        }
    };
    let (lo, hi) = match t.split_once('-') {
        Some((a, b)) => (one(a)?, one(b)?),
        None => {
            let v = one(&t)?;
            (v, v)
        }
    };
    if lo > hi {
        return Err(bad("the range is reversed"));
    }
    Ok((lo, hi))
}

/// One selected bundle for `get_llo_bundles`.
#[derive(Clone, Debug, Serialize)]
pub struct Selected<'a> {
    pub bundle: &'a Bundle,
    pub hlo_carried: Option<&'a str>,
    /// The grep hit is only inside `/* … */` comments, not in an instruction.
    pub in_comment: Option<bool>,
}

/// Filter bundles by address range and a regex over the whole logical bundle.
pub fn select<'a>(
    listing: &'a Listing,
    range: Option<(u64, u64)>,
    grep: Option<&Regex>,
) -> Vec<Selected<'a>> {
    let carried = listing.hlo_carried();
    listing
        .bundles
        .iter()
        .zip(carried)
        .filter(|(b, _)| range.is_none_or(|(lo, hi)| lo <= b.address && b.address <= hi))
        .filter_map(|(b, h)| {
            let in_comment = match grep {
                None => None,
                Some(re) => {
                    if !re.is_match(&b.text) {
                        return None;
                    }
                    Some(!re.is_match(&b.instruction_text()))
                }
            };
            Some(Selected {
                bundle: b,
                hlo_carried: h,
                in_comment,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "= control target key start\nLH: loop header\nLB: loop body\n= control target key end\n\n     0   :  { %a = foo } /* entry bundle: %k = custom-call(%x) */\n   0x1   :  { %b = shalt.err /* BoundsCheck for %11 = dma.hbm_to_vmem /*hbm=*/%s0, x\nhlo: k.1\n */ }\n  0x2 LB: > { %c = vmatmul.mubr.f32.mxu0 %v1 } /* Start region 3 */\n  0x3   : > > {}\n";

    #[test]
    fn grammar_ct_markers_and_column0_continuations() {
        let l = parse(SAMPLE, Path::new("x")).unwrap();
        assert_eq!(l.bundles.len(), 4);
        assert_eq!(l.legend.len(), 2);
        let b1 = &l.bundles[1];
        assert_eq!(b1.hlo.as_deref(), Some("k.1"));
        assert!(b1.text.ends_with("hlo: k.1 */ }"), "{}", b1.text);
        assert_eq!(b1.line, 7);
        let b2 = &l.bundles[2];
        assert_eq!(b2.ct_marker.as_deref(), Some("LB"));
        assert_eq!(b2.loop_depth, 1);
        assert_eq!(b2.regions, vec!["Start region 3"]);
        assert_eq!(l.bundles[3].loop_depth, 2);
        assert_eq!(
            l.hlo_carried(),
            vec![None, Some("k.1"), Some("k.1"), Some("k.1")]
        );
        assert!(l.addresses_are_dense());
    }

    #[test]
    fn nested_comments_are_stripped() {
        assert_eq!(strip_comments("a /* x /*y*/ z */ b"), "a  b");
        assert_eq!(strip_comments("{ %1 = f /* c */ }"), "{ %1 = f  }");
    }

    #[test]
    fn grep_flags_comment_only_hits() {
        let l = parse(SAMPLE, Path::new("x")).unwrap();
        let re = Regex::new(r"dma\.hbm_to_vmem").unwrap();
        let s = select(&l, None, Some(&re));
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].in_comment, Some(true));
    }

    #[test]
    fn address_ranges() {
        assert_eq!(parse_address_range("0xa-0xd").unwrap(), (10, 13));
        assert_eq!(parse_address_range("0x1a").unwrap(), (26, 26));
        assert_eq!(parse_address_range("0").unwrap(), (0, 0));
        assert_eq!(parse_address_range("0-0x3").unwrap(), (0, 3));
        assert!(parse_address_range("10-13").is_err());
        assert!(parse_address_range("a-d").is_err());
        assert!(parse_address_range("0xd-0xa").is_err());
        assert!(parse_address_range("0xzz").is_err());
    }

    #[test]
    fn empty_listing_is_malformed() {
        assert!(matches!(
            parse("nothing here\n", Path::new("f")),
            Err(LloError::Malformed { .. })
        ));
    }
}

#[cfg(test)]
mod fixture_tests {
    use super::*;

    /// §2.2's fixture facts about the v6e listing.
    #[test]
    fn seed_v6e_listing_facts() {
        let Some(f) = crate::testutil::fixtures() else {
            return;
        };
        let dir = f.join("jf_dump");
        let path = dir.join("1783579467107688879-matmul_optimized.1-124-final_bundles.txt");
        let l = parse(&crate::read_text(&path).unwrap(), &path).unwrap();
        assert_eq!(l.bundles.len(), 2705);
        assert!(l.addresses_are_dense());
        assert_eq!(l.bundles.iter().filter(|b| b.loop_depth > 0).count(), 2668);
        let ct: Vec<(u64, &str)> = l
            .bundles
            .iter()
            .filter_map(|b| b.ct_marker.as_deref().map(|c| (b.address, c)))
            .collect();
        assert_eq!(ct, vec![(0x1a, "LB"), (0x565, "PF"), (0xa62, "PF")]);
        let hlo: Vec<&str> = l.bundles.iter().filter_map(|b| b.hlo.as_deref()).collect();
        assert_eq!(hlo.len(), 8);
        assert!(hlo.iter().all(|h| *h == "matmul_optimized.1"));
        assert_eq!(l.legend.len(), 6);
    }
}
