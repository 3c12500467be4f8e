//! The session's file layer (SPEC §5 "Files", issue 53): what a script wrote through its
//! read-write mounts during a turn, kept off the host until the turn's commit records it.
//!
//! The host hands the layer to each advance as an `os_replay` entry of kind [`FILES`] (bytes
//! in the form below) and gets it back, updated, as an `os_log` entry of the same kind when the
//! advance touched a mount. With a layer given, every read-write mount is served by monty-fs's
//! overlay (reads see the host plus the layer, writes land in the layer) rebuilt from it; without
//! one, read-write mounts write to the host directly, as before.
//!
//! The form (all integers little-endian): `b"CAFL"`, a version byte (1), a `u32` count, then per
//! entry a kind byte (0 a file, 1 a directory, 2 a deleted entry), the `u32` length and UTF-8 of
//! its full virtual path (`/data/log.txt`), an `f64` modification time, and for a file the `u64`
//! length and bytes of its whole contents. `codeact.runtime._files` reads and writes the same.

use crate::engine::interp::{LayerEntry, MountTable};

use crate::errors::HostError;

/// Kind of the `os_replay` / `os_log` entry carrying the layer.
pub const FILES: &str = "files";

const MAGIC: &[u8; 4] = b"CAFL";
const VERSION: u8 = 1;

/// Entries by full virtual path, in path order.
pub type Layer = Vec<(String, LayerEntry)>;

/// The layer's bytes.
pub fn encode(layer: &Layer) -> Vec<u8> {
    let mut out = Vec::with_capacity(
        9 + layer
            .iter()
            .map(|(p, e)| {
                21 + p.len()
                    + match e {
                        LayerEntry::File { content, .. } => 8 + content.len(),
                        _ => 0,
                    }
            })
            .sum::<usize>(),
    );
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    out.extend_from_slice(&(layer.len() as u32).to_le_bytes());
    for (path, entry) in layer {
        let (kind, mtime) = match entry {
            LayerEntry::File { mtime, .. } => (0u8, *mtime),
            LayerEntry::Directory { mtime } => (1, *mtime),
            LayerEntry::Deleted => (2, 0.0),
        };
        out.push(kind);
        out.extend_from_slice(&(path.len() as u32).to_le_bytes());
        out.extend_from_slice(path.as_bytes());
        out.extend_from_slice(&mtime.to_le_bytes());
        if let LayerEntry::File { content, .. } = entry {
            out.extend_from_slice(&(content.len() as u64).to_le_bytes());
            out.extend_from_slice(content);
        }
    }
    out
}

/// Reads the layer's bytes.
pub fn decode(bytes: &[u8]) -> Result<Layer, HostError> {
    let bad = |why: &str| HostError::Config(format!("the file layer given is malformed: {why}"));
    let mut at = 0usize;
    let mut take = |n: usize| -> Result<&[u8], HostError> {
        let end = at
            .checked_add(n)
            .filter(|&e| e <= bytes.len())
            .ok_or_else(|| bad("truncated"))?;
        let part = &bytes[at..end];
        at = end;
        Ok(part)
    };
    if take(4)? != MAGIC || take(1)? != [VERSION] {
        return Err(bad("not a version 1 layer"));
    }
    let count = u32::from_le_bytes(take(4)?.try_into().expect("4 bytes"));
    let mut layer = Vec::with_capacity(count.min(1 << 16) as usize);
    for _ in 0..count {
        let kind = take(1)?[0];
        let n = u32::from_le_bytes(take(4)?.try_into().expect("4 bytes")) as usize;
        let path = std::str::from_utf8(take(n)?)
            .map_err(|_| bad("a path is not UTF-8"))?
            .to_owned();
        let mtime = f64::from_le_bytes(take(8)?.try_into().expect("8 bytes"));
        let entry = match kind {
            0 => {
                let len = u64::from_le_bytes(take(8)?.try_into().expect("8 bytes"));
                let len = usize::try_from(len).map_err(|_| bad("a file is too large"))?;
                LayerEntry::File {
                    content: take(len)?.to_vec(),
                    mtime,
                }
            }
            1 => LayerEntry::Directory { mtime },
            2 => LayerEntry::Deleted,
            _ => return Err(bad("unknown entry kind")),
        };
        layer.push((path, entry));
    }
    Ok(layer)
}

/// The entries of `layer` under the mount at `virtual_path`, keyed by mount-relative path
/// (the mount's root is `""`).
pub fn for_mount(layer: &Layer, virtual_path: &str) -> Vec<(String, LayerEntry)> {
    layer
        .iter()
        .filter_map(|(path, entry)| {
            let rest = path.strip_prefix(virtual_path)?;
            let relative = if rest.is_empty() {
                ""
            } else {
                rest.strip_prefix('/')?
            };
            Some((relative.to_owned(), entry.clone()))
        })
        .collect()
}

/// Every overlay mount's entries after an advance, by full virtual path, in path order.
pub fn export(table: &MountTable) -> Layer {
    let mut layer = Layer::new();
    for mount in table.mounts() {
        let Some(entries) = mount.overlay_layer() else {
            continue;
        };
        let prefix = mount.virtual_path();
        for (relative, entry) in entries {
            let path = if relative.is_empty() {
                prefix.to_owned()
            } else {
                format!("{prefix}/{relative}")
            };
            layer.push((path, entry));
        }
    }
    layer.sort_by(|a, b| a.0.cmp(&b.0));
    layer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_round_trips_and_refuses_truncated_bytes() {
        let layer: Layer = vec![
            ("/data".into(), LayerEntry::Directory { mtime: 1.5 }),
            (
                "/data/log.txt".into(),
                LayerEntry::File {
                    content: b"start\n".to_vec(),
                    mtime: 2.0,
                },
            ),
            ("/data/old".into(), LayerEntry::Deleted),
        ];
        let bytes = encode(&layer);
        assert_eq!(decode(&bytes).unwrap(), layer);
        assert!(decode(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode(b"CAFL\x02\0\0\0\0").is_err());
        let under = for_mount(&layer, "/data");
        assert_eq!(under[0].0, "");
        assert_eq!(under[1].0, "log.txt");
        assert!(for_mount(&layer, "/dat").is_empty());
    }
}
