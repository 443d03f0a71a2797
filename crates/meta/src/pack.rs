//! The pack writer of the metadata fold: a cycle's new objects as one
//! pack (v2, undeltified, stored zlib) and its index (v2), each synced
//! before it is renamed into `objects/pack`, then the directory synced.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::Path;

use gix::ObjectId;

/// Writes `objects` as one pack plus its index under `objects/pack`, each
/// synced before it is renamed into place (the pack first: a reader never
/// finds an index without its pack), then the directory synced.
///
/// Written here rather than through gix-pack: its bundle writer indexes a
/// pack by inflating and hashing every entry again, while this fold already
/// knows each object's id, offset and CRC; the pack format (v2, undeltified
/// entries) and the index format (v2) are small and fixed.
pub(super) fn write_pack(
    git_dir: &Path,
    objects: &HashMap<ObjectId, (gix::objs::Kind, Vec<u8>)>,
) -> std::io::Result<()> {
    if objects.is_empty() {
        return Ok(());
    }
    let mut pack = Vec::with_capacity(64 + objects.len() * 256);
    pack.extend_from_slice(b"PACK");
    pack.extend_from_slice(&2u32.to_be_bytes());
    pack.extend_from_slice(&(objects.len() as u32).to_be_bytes());
    // (id, offset, crc32) of every entry.
    let mut entries: Vec<(ObjectId, u64, u32)> = Vec::with_capacity(objects.len());
    for (id, (kind, data)) in objects.iter() {
        let offset = pack.len() as u64;
        let type_code: u8 = match kind {
            gix::objs::Kind::Commit => 1,
            gix::objs::Kind::Tree => 2,
            gix::objs::Kind::Blob => 3,
            gix::objs::Kind::Tag => 4,
        };
        let mut size = data.len();
        let mut byte = (type_code << 4) | (size & 0x0f) as u8;
        size >>= 4;
        while size > 0 {
            pack.push(byte | 0x80);
            byte = (size & 0x7f) as u8;
            size >>= 7;
        }
        pack.push(byte);
        write_stored_zlib(&mut pack, data);
        let mut crc = flate2::Crc::new();
        crc.update(&pack[offset as usize..]);
        entries.push((*id, offset, crc.sum()));
    }
    let pack_sum = sha1(&pack)?;
    pack.extend_from_slice(pack_sum.as_bytes());

    entries.sort_unstable_by_key(|e| e.0);
    let mut index = Vec::with_capacity(8 + 1024 + entries.len() * 28 + 40);
    index.extend_from_slice(b"\xfftOc");
    index.extend_from_slice(&2u32.to_be_bytes());
    let mut fanout = [0u32; 256];
    for (id, _, _) in &entries {
        fanout[id.as_bytes()[0] as usize] += 1;
    }
    let mut running = 0u32;
    for count in fanout {
        running += count;
        index.extend_from_slice(&running.to_be_bytes());
    }
    for (id, _, _) in &entries {
        index.extend_from_slice(id.as_bytes());
    }
    for (_, _, crc) in &entries {
        index.extend_from_slice(&crc.to_be_bytes());
    }
    let mut large = Vec::new();
    for (_, offset, _) in &entries {
        if *offset < 0x8000_0000 {
            index.extend_from_slice(&(*offset as u32).to_be_bytes());
        } else {
            index.extend_from_slice(&(0x8000_0000 | large.len() as u32).to_be_bytes());
            large.push(*offset);
        }
    }
    for offset in large {
        index.extend_from_slice(&offset.to_be_bytes());
    }
    index.extend_from_slice(pack_sum.as_bytes());
    let index_sum = sha1(&index)?;
    index.extend_from_slice(index_sum.as_bytes());

    let pack_dir = git_dir.join("objects").join("pack");
    std::fs::create_dir_all(&pack_dir)?;
    let name = format!("pack-{}", pack_sum.to_hex());
    for (bytes, ext) in [(&pack, "pack"), (&index, "idx")] {
        let tmp = pack_dir.join(format!("tmp_{name}.{ext}"));
        let mut file = File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, pack_dir.join(format!("{name}.{ext}")))?;
    }
    vole_log::storage::sync_dir(&pack_dir)
}

/// Appends `data` as a zlib stream of stored (uncompressed) deflate
/// blocks. Metadata objects are a few hundred bytes; starting a real
/// deflate stream per object (zlib clears a 64 KiB hash table each time)
/// cost more than the whole rest of the pack, for a saving of about a
/// third of a small pack. `git gc` recompresses them like any other pack.
fn write_stored_zlib(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(&[0x78, 0x01]);
    let mut chunks = data.chunks(0xffff).peekable();
    if chunks.peek().is_none() {
        out.extend_from_slice(&[0x01, 0x00, 0x00, 0xff, 0xff]);
    }
    while let Some(chunk) = chunks.next() {
        out.push(u8::from(chunks.peek().is_none()));
        let len = chunk.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(chunk);
    }
    // Adler-32 of the uncompressed data, big-endian.
    let (mut a, mut b) = (1u32, 0u32);
    for block in data.chunks(5552) {
        for byte in block {
            a += u32::from(*byte);
            b += a;
        }
        a %= 65521;
        b %= 65521;
    }
    out.extend_from_slice(&((b << 16) | a).to_be_bytes());
}

fn sha1(bytes: &[u8]) -> std::io::Result<ObjectId> {
    let mut hasher = gix::hash::hasher(gix::hash::Kind::Sha1);
    hasher.update(bytes);
    hasher.try_finalize().map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_zlib_streams_inflate_to_their_input() {
        for size in [0usize, 1, 450, 0xffff, 0x1_0000, 200_000] {
            let data: Vec<u8> = (0..size).map(|i| (i * 7 % 251) as u8).collect();
            let mut stream = Vec::new();
            write_stored_zlib(&mut stream, &data);
            let mut back = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::ZlibDecoder::new(&stream[..]), &mut back)
                .unwrap();
            assert_eq!(back, data, "size {size}");
        }
    }
}
