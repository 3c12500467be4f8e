//! The snapshot envelope around Monty's own dump bytes.
//!
//! Layout (all integers little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 4 | magic `CAMS` |
//! | 2 | envelope format version ([`FORMAT_VERSION`]) |
//! | 1 + n | length and text of the Monty version that wrote the payload |
//! | 2 | Monty's dump version of the payload (`crate::engine::DUMP_VERSION` of the writer) |
//! | 1 | flags (bit 0: the tag is an HMAC under the host's `snapshot_key`) |
//! | 4 | the recursion limit the paused script runs under (sizes the host stack on load) |
//! | 8 | payload length |
//! | payload | Monty's dump of the paused call |
//! | 32 | tag: SHA-256 of everything before it, or HMAC-SHA256 when signed |
//!
//! Anything else (truncated, altered, foreign, another version, another key) is a
//! `SnapshotError` before a single payload byte is decoded. A payload written by another
//! Monty release loads when its dump version is one this build reads
//! (`MIN_SUPPORTED_DUMP_VERSION..=DUMP_VERSION`); Monty upgrades it while loading.
//! Envelope format 1 (codeact 0.1.0, Monty 0.0.19) is refused with both versions named.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::errors::HostError;

pub const MAGIC: &[u8; 4] = b"CAMS";
pub const FORMAT_VERSION: u16 = 2;
/// The Monty release embedded in this build (checked against `Cargo.lock` by the tests).
pub const MONTY_VERSION: &str = "1.4.0";
const TAG_LEN: usize = 32;
const FLAG_SIGNED: u8 = 1;
const FLAG_EXTRA: u8 = 2;

type HmacSha256 = Hmac<Sha256>;

fn tag(key: Option<&[u8]>, data: &[u8]) -> [u8; TAG_LEN] {
    match key {
        Some(key) => {
            let mut mac = HmacSha256::new_from_slice(key).expect("HMAC accepts keys of any length");
            mac.update(data);
            mac.finalize().into_bytes().into()
        }
        None => Sha256::digest(data).into(),
    }
}

/// Wraps Monty's payload in the envelope; signs it when `key` is given.
#[cfg(test)]
pub fn seal(payload: &[u8], key: Option<&[u8]>, recursion_depth: u32) -> Vec<u8> {
    seal_with_extra(payload, key, recursion_depth, None)
}

/// Like [`seal`], with codeact's own section after the payload when `extra` is given
/// (flag bit 1; its length, 8 bytes, then the bytes): the calls a script awaits.
pub fn seal_with_extra(
    payload: &[u8],
    key: Option<&[u8]>,
    recursion_depth: u32,
    extra: Option<&[u8]>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 64 + extra.map_or(0, |e| e.len() + 8));
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.push(MONTY_VERSION.len() as u8);
    out.extend_from_slice(MONTY_VERSION.as_bytes());
    out.extend_from_slice(&crate::engine::DUMP_VERSION.to_le_bytes());
    let mut flags = if key.is_some() { FLAG_SIGNED } else { 0 };
    if extra.is_some() {
        flags |= FLAG_EXTRA;
    }
    out.push(flags);
    out.extend_from_slice(&recursion_depth.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(payload);
    if let Some(extra) = extra {
        out.extend_from_slice(&(extra.len() as u64).to_le_bytes());
        out.extend_from_slice(extra);
    }
    let t = tag(key, &out);
    out.extend_from_slice(&t);
    out
}

/// Reads the recursion limit from the envelope header without checking the tag (the
/// caller sizes the stack with it; `open` verifies everything before decoding).
pub fn peek_depth(bytes: &[u8]) -> Result<usize, HostError> {
    let bad = |msg: &str| HostError::Snapshot(msg.to_string());
    if bytes.len() < 7 || &bytes[..4] != MAGIC {
        return Err(bad("these bytes are not a codeact snapshot (bad magic)"));
    }
    let version = u16::from_le_bytes([bytes[4], bytes[5]]);
    if version != FORMAT_VERSION {
        // `open` names both versions.
        return Ok(0);
    }
    let at = 4 + 2 + 1 + bytes[6] as usize + 2 + 1;
    let depth = bytes
        .get(at..at + 4)
        .ok_or_else(|| bad("snapshot is truncated"))?;
    Ok(u32::from_le_bytes(depth.try_into().expect("4 bytes")) as usize)
}

/// Checks the envelope and returns the payload slice.
#[cfg(test)]
pub fn open<'a>(bytes: &'a [u8], key: Option<&[u8]>) -> Result<&'a [u8], HostError> {
    open_with_extra(bytes, key).map(|(payload, _)| payload)
}

/// Checks the envelope and returns the payload slice and codeact's own section, if any.
pub fn open_with_extra<'a>(
    bytes: &'a [u8],
    key: Option<&[u8]>,
) -> Result<(&'a [u8], Option<&'a [u8]>), HostError> {
    let bad = |msg: String| Err(HostError::Snapshot(msg));
    if bytes.len() < 4 || &bytes[..4] != MAGIC {
        return bad("these bytes are not a codeact snapshot (bad magic)".to_string());
    }
    let mut pos = 4;
    let take = |pos: &mut usize, n: usize| -> Result<&'a [u8], HostError> {
        let end = match pos.checked_add(n) {
            Some(end) if end <= bytes.len() => end,
            _ => {
                return Err(HostError::Snapshot(format!(
                    "snapshot is truncated ({} bytes)",
                    bytes.len()
                )));
            }
        };
        let s = &bytes[*pos..end];
        *pos = end;
        Ok(s)
    };
    let version = u16::from_le_bytes(take(&mut pos, 2)?.try_into().expect("2 bytes"));
    if version == 1 {
        // codeact 0.1.0: the version text follows as in format 2.
        let writer = take(&mut pos, 1)
            .and_then(|n| take(&mut pos, n[0] as usize))
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_else(|_| "0.0.19".to_string());
        return bad(format!(
            "snapshot was written by codeact 0.1.0 with Monty {writer} (envelope format 1); this              build embeds Monty {MONTY_VERSION} (dump versions {}..={}), which cannot resume it:              re-run the script from its start",
            crate::engine::MIN_SUPPORTED_DUMP_VERSION,
            crate::engine::DUMP_VERSION
        ));
    }
    if version != FORMAT_VERSION {
        return bad(format!(
            "snapshot format version {version} is not supported (this build reads {FORMAT_VERSION})"
        ));
    }
    let vlen = take(&mut pos, 1)?[0] as usize;
    let monty = take(&mut pos, vlen)?;
    let dump_version = u16::from_le_bytes(take(&mut pos, 2)?.try_into().expect("2 bytes"));
    if !(crate::engine::MIN_SUPPORTED_DUMP_VERSION..=crate::engine::DUMP_VERSION)
        .contains(&dump_version)
    {
        return bad(format!(
            "snapshot was written by Monty {} (dump version {dump_version}); this build embeds              Monty {MONTY_VERSION}, which reads dump versions {}..={}",
            String::from_utf8_lossy(monty),
            crate::engine::MIN_SUPPORTED_DUMP_VERSION,
            crate::engine::DUMP_VERSION
        ));
    }
    let flags = take(&mut pos, 1)?[0];
    take(&mut pos, 4)?; // the recursion limit: read by `peek_depth`
    let plen = u64::from_le_bytes(take(&mut pos, 8)?.try_into().expect("8 bytes"));
    let plen = usize::try_from(plen)
        .map_err(|_| HostError::Snapshot("snapshot payload length overflows".into()))?;
    let payload = take(&mut pos, plen)?;
    if flags & !(FLAG_SIGNED | FLAG_EXTRA) != 0 {
        return bad(format!("snapshot has unknown flags {flags:#04x}"));
    }
    let extra = if flags & FLAG_EXTRA != 0 {
        let elen = u64::from_le_bytes(take(&mut pos, 8)?.try_into().expect("8 bytes"));
        let elen = usize::try_from(elen)
            .map_err(|_| HostError::Snapshot("snapshot section length overflows".into()))?;
        Some(take(&mut pos, elen)?)
    } else {
        None
    };
    let body_end = pos;
    let found = take(&mut pos, TAG_LEN)?;
    if pos != bytes.len() {
        return bad(format!(
            "snapshot has {} unexpected trailing bytes",
            bytes.len() - pos
        ));
    }
    let signed = flags & FLAG_SIGNED != 0;
    match (signed, key) {
        (true, None) => {
            return bad("snapshot is signed; give the runtime its snapshot_key to load it".into());
        }
        (false, Some(_)) => {
            return bad("snapshot is unsigned, but this runtime only loads snapshots signed with its snapshot_key".into());
        }
        _ => {}
    }
    let ok = match key {
        Some(k) => {
            let mut mac = HmacSha256::new_from_slice(k).expect("HMAC accepts keys of any length");
            mac.update(&bytes[..body_end]);
            mac.verify_slice(found).is_ok()
        }
        None => tag(None, &bytes[..body_end]) == found,
    };
    if !ok {
        return bad(if signed {
            "integrity check failed: the bytes were altered or signed with another key".into()
        } else {
            "integrity check failed: the bytes were altered".into()
        });
    }
    Ok((payload, extra))
}

/// First byte of codeact's section in a namespace session's bytes (`crate::py_repl`); a
/// paused script's section starts with its tasks format (1).
pub const SESSION_MARK: u8 = 0xC5;
/// The session section's kind byte (after the mark and the format) for an idle session.
pub const SESSION_IDLE: u8 = 0;

/// Whether `bytes` are a namespace session's (idle or paused) rather than a paused script's,
/// read from the section of verified bytes.
pub fn is_session(bytes: &[u8], key: Option<&[u8]>) -> Result<bool, HostError> {
    let (_, extra) = open_with_extra(bytes, key)?;
    Ok(extra.is_some_and(|section| section.first() == Some(&SESSION_MARK)))
}

/// Like [`open_with_extra`], for the bytes of a paused script (`MontyRuntime.resume`,
/// `resume_gather`, `inspect`, `inspect_gather`): a namespace session's bytes are refused
/// with what they are and the method that takes them.
pub fn open_run<'a>(
    bytes: &'a [u8],
    key: Option<&[u8]>,
) -> Result<(&'a [u8], Option<&'a [u8]>), HostError> {
    let (payload, extra) = open_with_extra(bytes, key)?;
    if let Some(section) = extra
        && section.first() == Some(&SESSION_MARK)
    {
        return Err(HostError::Snapshot(
            if section.get(2) == Some(&SESSION_IDLE) {
                "these bytes are an idle namespace session (NamespaceSession.dump()), not a paused \
             script: load them with MontyRuntime.load_session"
                    .into()
            } else {
                "these bytes are a namespace session paused at a tool call (the Call.dump() of a \
             NamespaceSession.feed), not a paused script: resume them with \
             MontyRuntime.resume_session (inspect_session reads the call)"
                    .into()
            },
        ));
    }
    Ok((payload, extra))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealed(key: Option<&[u8]>) -> Vec<u8> {
        seal(b"payload bytes", key, 1000)
    }

    #[test]
    fn round_trip_unsigned_and_signed() {
        let bytes = sealed(None);
        assert_eq!(
            open(&bytes, None).map_err(|_| ()).expect("opens"),
            b"payload bytes"
        );
        let key = b"0123456789abcdef";
        assert_eq!(
            open(&sealed(Some(key)), Some(key))
                .map_err(|_| ())
                .expect("opens"),
            b"payload bytes"
        );
    }

    fn refusal(bytes: &[u8], key: Option<&[u8]>) -> String {
        match open(bytes, key) {
            Ok(_) => panic!("accepted"),
            Err(HostError::Snapshot(msg)) => msg,
            Err(other) => panic!("wrong error {other:?}"),
        }
    }

    #[test]
    fn the_extra_section_round_trips_and_is_covered_by_the_tag() {
        let key = b"0123456789abcdef";
        for k in [None, Some(&key[..])] {
            let bytes = seal_with_extra(b"payload bytes", k, 1000, Some(b"awaited calls"));
            let (payload, extra) = open_with_extra(&bytes, k).map_err(|_| ()).expect("opens");
            assert_eq!(payload, b"payload bytes");
            assert_eq!(extra, Some(&b"awaited calls"[..]));
            for cut in 0..bytes.len() {
                refusal(&bytes[..cut], k);
            }
            for i in 0..bytes.len() {
                let mut altered = bytes.clone();
                altered[i] ^= 0x40;
                refusal(&altered, k);
            }
        }
        let plain = sealed(None);
        let (_, extra) = open_with_extra(&plain, None)
            .map_err(|_| ())
            .expect("opens");
        assert_eq!(extra, None);
    }

    #[test]
    fn every_truncation_is_refused() {
        let bytes = sealed(None);
        for cut in 0..bytes.len() {
            refusal(&bytes[..cut], None);
        }
    }

    #[test]
    fn every_flipped_byte_is_refused() {
        let bytes = sealed(None);
        for i in 0..bytes.len() {
            let mut altered = bytes.clone();
            altered[i] ^= 0x40;
            refusal(&altered, None);
        }
    }

    #[test]
    fn keys_must_match() {
        let key = b"0123456789abcdef";
        assert!(refusal(&sealed(Some(key)), None).contains("signed"));
        assert!(refusal(&sealed(None), Some(key)).contains("unsigned"));
        assert!(refusal(&sealed(Some(key)), Some(b"another key 1234")).contains("integrity"));
    }

    #[test]
    fn the_depth_is_read_from_the_header() {
        assert_eq!(
            peek_depth(&sealed(None)).map_err(|_| ()).expect("reads"),
            1000
        );
        assert!(peek_depth(b"CAMS").is_err());
        assert!(peek_depth(b"nope and more").is_err());
    }

    #[test]
    fn format_1_names_both_versions() {
        let mut bytes = b"CAMS".to_vec();
        bytes.extend_from_slice(&1u16.to_le_bytes());
        bytes.push(6);
        bytes.extend_from_slice(b"0.0.19");
        bytes.extend_from_slice(&[0; 48]);
        let msg = refusal(&bytes, None);
        assert!(
            msg.contains("0.0.19") && msg.contains(MONTY_VERSION),
            "{msg}"
        );
    }

    #[test]
    fn dump_versions_outside_the_readable_range_are_refused() {
        let mut bytes = sealed(None);
        let at = 4 + 2 + 1 + MONTY_VERSION.len();
        bytes[at..at + 2].copy_from_slice(&(crate::engine::DUMP_VERSION + 1).to_le_bytes());
        assert!(refusal(&bytes, None).contains("dump version"));
    }

    #[test]
    fn session_bytes_are_refused_by_open_run_with_the_method_that_takes_them() {
        let refused = |kind: u8| match open_run(
            &seal_with_extra(b"payload", None, 1000, Some(&[SESSION_MARK, 1, kind, 0])),
            None,
        ) {
            Err(HostError::Snapshot(msg)) => msg,
            _ => panic!("accepted"),
        };
        assert!(refused(SESSION_IDLE).contains("load_session"));
        assert!(refused(1).contains("resume_session"));
        let run = seal_with_extra(b"payload", None, 1000, Some(&[1, 0]));
        assert!(open_run(&run, None).is_ok());
        assert!(open_run(&sealed(None), None).is_ok());
    }

    #[test]
    fn huge_lengths_do_not_overflow() {
        let mut bytes = sealed(None);
        let at = 4 + 2 + 1 + MONTY_VERSION.len() + 2 + 1 + 4;
        bytes[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(refusal(&bytes, None).contains("truncated"));
    }
}
