//! The serial part of the FFT2D demo, shared by the hmpi program
//! (`examples/fft2d/main.rs`) and the rsmpi one (`examples/fft2d-rsmpi`):
//! the 1D FFT, the input, the serial reference, the block packing of the
//! transpose, the result table and its PNG plot. It depends on no
//! message-passing library.

#![allow(dead_code)] // each program uses its own part of it

use std::f64::consts::PI;
use std::fmt::Write as _;

/// A complex number `[re, im]`: plain `f64`s, so that a slice of them is
/// sent as `f64`s (`as_flattened`) by any library.
pub type C64 = [f64; 2];

pub fn add(a: C64, b: C64) -> C64 {
    [a[0] + b[0], a[1] + b[1]]
}

pub fn sub(a: C64, b: C64) -> C64 {
    [a[0] - b[0], a[1] - b[1]]
}

pub fn mul(a: C64, b: C64) -> C64 {
    [a[0] * b[0] - a[1] * b[1], a[0] * b[1] + a[1] * b[0]]
}

pub fn cis(a: f64) -> C64 {
    [a.cos(), a.sin()]
}

pub fn dist(a: C64, b: C64) -> f64 {
    (a[0] - b[0]).hypot(a[1] - b[1])
}

/// In-place iterative radix-2 FFT (forward, no scaling); `x.len()` is a
/// power of two; `tw[k] = e^{-2πik/n}` for `k < n/2`.
pub fn fft(x: &mut [C64], tw: &[C64]) {
    let n = x.len();
    let mut j = 0;
    for i in 1..n {
        let mut bit = n >> 1;
        while j & bit != 0 {
            j ^= bit;
            bit >>= 1;
        }
        j |= bit;
        if i < j {
            x.swap(i, j);
        }
    }
    let mut len = 2;
    while len <= n {
        let step = n / len;
        for start in (0..n).step_by(len) {
            for k in 0..len / 2 {
                let w = tw[k * step];
                let a = x[start + k];
                let b = mul(x[start + k + len / 2], w);
                x[start + k] = add(a, b);
                x[start + k + len / 2] = sub(a, b);
            }
        }
        len <<= 1;
    }
}

pub fn twiddles(n: usize) -> Vec<C64> {
    (0..n / 2)
        .map(|k| cis(-2.0 * PI * k as f64 / n as f64))
        .collect()
}

/// The input matrix's element (r, c).
pub fn input(r: usize, c: usize) -> C64 {
    [
        (r as f64 * 0.37 + c as f64 * 0.11).sin() + (c % 7) as f64 * 0.1,
        ((r * c) as f64 * 0.013).cos() - (r % 5) as f64 * 0.2,
    ]
}

/// The serial 2D FFT of the whole N × N input (row-major).
pub fn serial_fft2d(n: usize, tw: &[C64]) -> Vec<C64> {
    let mut m: Vec<C64> = (0..n * n).map(|i| input(i / n, i % n)).collect();
    for row in m.chunks_mut(n) {
        fft(row, tw);
    }
    let mut col = vec![[0.0; 2]; n];
    for c in 0..n {
        for r in 0..n {
            col[r] = m[r * n + c];
        }
        fft(&mut col, tw);
        for r in 0..n {
            m[r * n + c] = col[r];
        }
    }
    m
}

/// Checks the FFT against a direct DFT.
pub fn check_fft() -> Result<(), String> {
    let n = 64;
    let tw = twiddles(n);
    let x: Vec<C64> = (0..n).map(|i| input(3, i)).collect();
    let mut y = x.clone();
    fft(&mut y, &tw);
    for (k, yk) in y.iter().enumerate() {
        let d = (0..n).fold([0.0; 2], |acc, j| {
            add(acc, mul(x[j], cis(-2.0 * PI * (j * k) as f64 / n as f64)))
        });
        if dist(d, *yk) > 1e-9 {
            return Err(format!("the FFT differs from the DFT at {k}"));
        }
    }
    Ok(())
}

/// The geometry of one rank's part: `n` columns, `b = n / p` rows.
#[derive(Clone, Copy)]
pub struct Shape {
    pub n: usize,
    pub b: usize,
    pub p: usize,
    pub me: usize,
}

impl Shape {
    pub fn new(n: usize, p: usize, me: usize) -> Result<Shape, String> {
        if !n.is_power_of_two() || n % p != 0 || n < p {
            return Err(format!(
                "--n {n}: must be a power of two and a multiple of the {p} ranks"
            ));
        }
        Ok(Shape { n, b: n / p, p, me })
    }

    /// This rank's rows of the input.
    pub fn local_input(&self) -> Vec<C64> {
        let (n, b, me) = (self.n, self.b, self.me);
        (0..b * n).map(|i| input(me * b + i / n, i % n)).collect()
    }

    /// Packs every block `j` (columns j·B..) of `m` row by row into
    /// `out[j·B·B..]`.
    pub fn pack_all(&self, m: &[C64], out: &mut [C64]) {
        let (n, b) = (self.n, self.b);
        for j in 0..self.p {
            for x in 0..b {
                out[(j * b + x) * b..][..b].copy_from_slice(&m[x * n + j * b..][..b]);
            }
        }
    }

    /// Packs block `j` of `m` row by row at the end of `out`.
    pub fn pack_into(&self, m: &[C64], j: usize, out: &mut Vec<C64>) {
        for x in 0..self.b {
            out.extend_from_slice(&m[x * self.n + j * self.b..][..self.b]);
        }
    }

    /// Unpacks a block from rank `i` into `m`, transposed.
    pub fn unpack(&self, blk: &[C64], i: usize, m: &mut [C64]) {
        let (n, b) = (self.n, self.b);
        for x in 0..b {
            for y in 0..b {
                m[y * n + i * b + x] = blk[x * b + y];
            }
        }
    }

    /// [`Shape::unpack`] of a block given as its `f64`s.
    pub fn unpack_flat(&self, blk: &[f64], i: usize, m: &mut [C64]) {
        let (n, b) = (self.n, self.b);
        for x in 0..b {
            for y in 0..b {
                let k = 2 * (x * b + y);
                m[y * n + i * b + x] = [blk[k], blk[k + 1]];
            }
        }
    }

    /// Bytes of this rank's rows (what one pass over them copies).
    pub fn local_bytes(&self) -> u64 {
        (self.b * self.n * std::mem::size_of::<C64>()) as u64
    }

    /// 1D FFTs of every local row.
    pub fn rows_fft(&self, m: &mut [C64], tw: &[C64]) {
        for row in m.chunks_mut(self.n) {
            fft(row, tw);
        }
    }
}

/// One variant's measurements (medians over the repetitions).
#[derive(Clone, Debug)]
pub struct Row {
    pub name: String,
    /// Seconds per 2D FFT.
    pub total: f64,
    /// Seconds of it spent in the two transposes.
    pub transpose: f64,
    /// Bytes this rank copied per 2D FFT to move the data (see the
    /// program's docs for what counts).
    pub copied: u64,
    /// Largest difference from the serial FFT, relative to its largest
    /// element.
    pub error: f64,
}

impl Row {
    /// `name total transpose copied error`: how the rsmpi program hands
    /// its rows to the table.
    pub fn to_line(&self) -> String {
        format!(
            "{} {:e} {:e} {} {:e}",
            self.name, self.total, self.transpose, self.copied, self.error
        )
    }

    pub fn from_line(line: &str) -> Result<Row, String> {
        let f: Vec<&str> = line.split_whitespace().collect();
        let bad = || format!("not a result line: {line:?}");
        if f.len() != 5 {
            return Err(bad());
        }
        Ok(Row {
            name: f[0].to_string(),
            total: f[1].parse().map_err(|_| bad())?,
            transpose: f[2].parse().map_err(|_| bad())?,
            copied: f[3].parse().map_err(|_| bad())?,
            error: f[4].parse().map_err(|_| bad())?,
        })
    }
}

/// The median of `v` (sorted here).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The table of `rows`; speed-ups are against the row named `copy`.
pub fn table(rows: &[Row]) -> String {
    let base = rows.iter().find(|r| r.name == "copy").map(|r| r.total);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<14} {:>10} {:>13} {:>12} {:>9} {:>10}",
        "variant", "ms per FFT", "transposes ms", "MiB copied", "speed-up", "max error"
    );
    for r in rows {
        let speedup = base.map_or("".into(), |b| format!("{:.2}x", b / r.total));
        let _ = writeln!(
            s,
            "{:<14} {:>10.3} {:>13.3} {:>12.1} {:>9} {:>10.1e}",
            r.name,
            r.total * 1e3,
            r.transpose * 1e3,
            r.copied as f64 / (1 << 20) as f64,
            speedup,
            r.error
        );
    }
    s
}

/// A bar per row (its height the time per FFT, the dark part the
/// transposes), labelled with the variant and the milliseconds, as a PNG.
pub fn plot(rows: &[Row]) -> Vec<u8> {
    let (bar, gap, top, bottom) = (70usize, 40usize, 40usize, 30usize);
    let h = 300usize;
    let w = gap + rows.len() * (bar + gap);
    let mut img = Image::new(w, h, [255, 255, 255]);
    let max = rows
        .iter()
        .map(|r| r.total)
        .fold(f64::MIN_POSITIVE, f64::max);
    let span = (h - top - bottom) as f64;
    let colors = [
        [70, 110, 180],
        [220, 120, 40],
        [60, 160, 90],
        [170, 70, 160],
        [110, 110, 110],
        [150, 110, 70],
    ];
    for (i, r) in rows.iter().enumerate() {
        let x = gap + i * (bar + gap);
        let base = h - bottom;
        let total = ((r.total / max) * span).round() as usize;
        let comm = ((r.transpose / max) * span).round().min(total as f64) as usize;
        let c = colors[i % colors.len()];
        let light = [c[0] / 2 + 127, c[1] / 2 + 127, c[2] / 2 + 127];
        img.rect(x, base - total, bar, total - comm, light);
        img.rect(x, base - comm, bar, comm, c);
        let scale = if r.name.len() * 8 < bar + gap - 4 {
            2
        } else {
            1
        };
        img.text(x, base + 8, &r.name, scale, [0, 0, 0]);
        img.text(
            x,
            (base - total).saturating_sub(14),
            &format!("{:.1}ms", r.total * 1e3),
            2,
            [0, 0, 0],
        );
    }
    img.rect(gap / 2, h - bottom, w - gap, 1, [0, 0, 0]);
    img.text(gap / 2, 4, "ms per fft  dark: transposes", 2, [0, 0, 0]);
    img.png()
}

/// An RGB image with just what the plot draws.
struct Image {
    w: usize,
    h: usize,
    px: Vec<u8>,
}

impl Image {
    fn new(w: usize, h: usize, bg: [u8; 3]) -> Image {
        Image {
            w,
            h,
            px: bg.iter().copied().cycle().take(w * h * 3).collect(),
        }
    }

    fn rect(&mut self, x: usize, y: usize, w: usize, h: usize, c: [u8; 3]) {
        for yy in y..(y + h).min(self.h) {
            for xx in x..(x + w).min(self.w) {
                self.px[(yy * self.w + xx) * 3..][..3].copy_from_slice(&c);
            }
        }
    }

    /// Text in a 3 × 5 pixel font scaled by `scale` (the characters the
    /// plot needs; others are blank).
    fn text(&mut self, x: usize, y: usize, s: &str, scale: usize, c: [u8; 3]) {
        for (k, ch) in s.chars().enumerate() {
            let g = glyph(ch);
            for (row, bits) in g.iter().enumerate() {
                for col in 0..3 {
                    if bits & (4 >> col) != 0 {
                        let px = x + (k * 4 + col) * scale;
                        self.rect(px, y + row * scale, scale, scale, c);
                    }
                }
            }
        }
    }

    /// The PNG file: 8-bit RGB, unfiltered rows, stored (uncompressed)
    /// deflate blocks.
    fn png(&self) -> Vec<u8> {
        let mut raw = Vec::with_capacity((self.w * 3 + 1) * self.h);
        for row in self.px.chunks(self.w * 3) {
            raw.push(0); // filter: none
            raw.extend_from_slice(row);
        }
        let mut z = vec![0x78, 0x01];
        let mut blocks = raw.chunks(65535).peekable();
        while let Some(b) = blocks.next() {
            z.push(u8::from(blocks.peek().is_none()));
            let len = b.len() as u16;
            z.extend_from_slice(&len.to_le_bytes());
            z.extend_from_slice(&(!len).to_le_bytes());
            z.extend_from_slice(b);
        }
        z.extend_from_slice(&adler32(&raw).to_be_bytes());
        let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
        let mut ihdr = Vec::new();
        ihdr.extend_from_slice(&(self.w as u32).to_be_bytes());
        ihdr.extend_from_slice(&(self.h as u32).to_be_bytes());
        ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
        chunk(&mut out, b"IHDR", &ihdr);
        chunk(&mut out, b"IDAT", &z);
        chunk(&mut out, b"IEND", &[]);
        out
    }
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let start = out.len();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let crc = crc32(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

fn crc32(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
        }
    }
    !c
}

fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for &x in data {
        a = (a + u32::from(x)) % 65521;
        b = (b + a) % 65521;
    }
    (b << 16) | a
}

/// Rows of a 3 × 5 glyph, the top row first, bit 2 the left column.
fn glyph(c: char) -> [u8; 5] {
    match c {
        '0' => [7, 5, 5, 5, 7],
        '1' => [2, 6, 2, 2, 7],
        '2' => [7, 1, 7, 4, 7],
        '3' => [7, 1, 7, 1, 7],
        '4' => [5, 5, 7, 1, 1],
        '5' => [7, 4, 7, 1, 7],
        '6' => [7, 4, 7, 5, 7],
        '7' => [7, 1, 1, 1, 1],
        '8' => [7, 5, 7, 5, 7],
        '9' => [7, 5, 7, 1, 7],
        '.' => [0, 0, 0, 0, 2],
        '+' => [0, 2, 7, 2, 0],
        '-' => [0, 0, 7, 0, 0],
        ':' => [0, 2, 0, 2, 0],
        '/' => [1, 1, 2, 4, 4],
        '_' => [0, 0, 0, 0, 7],
        'a' => [0, 6, 1, 7, 7],
        'b' => [4, 4, 7, 5, 7],
        'g' => [3, 5, 3, 1, 6],
        'h' => [4, 4, 7, 5, 5],
        'k' => [4, 5, 6, 5, 5],
        'v' => [0, 5, 5, 5, 2],
        'w' => [0, 5, 5, 7, 7],
        'c' => [0, 7, 4, 4, 7],
        'd' => [1, 1, 7, 5, 7],
        'e' => [7, 4, 7, 4, 7],
        'f' => [3, 4, 7, 4, 4],
        'i' => [2, 0, 2, 2, 2],
        'l' => [6, 2, 2, 2, 7],
        'm' => [0, 7, 7, 5, 5],
        'n' => [0, 6, 5, 5, 5],
        'o' => [0, 7, 5, 5, 7],
        'p' => [7, 5, 7, 4, 4],
        'r' => [0, 5, 6, 4, 4],
        's' => [3, 4, 2, 1, 6],
        't' => [2, 7, 2, 2, 3],
        'u' => [0, 5, 5, 5, 7],
        'x' => [0, 5, 2, 5, 0],
        'y' => [5, 5, 7, 1, 7],
        _ => [0; 5],
    }
}
