//! A chain verifier in Rust, checked by specdec-check through its process protocol (notes/PROTOCOL.md):
//! `specdec-check verify exec:'target/release/specdec-verify --serve'` (add `--bug` for the buggy variant).
//!
//! The exact rule (Leviathan et al. 2023, Algorithm 1): accept draft x at position k when u * q_k(x) < p_k(x),
//! u uniform in [0, 1); at the first rejection emit a token of the residual max(0, p_k - q_k); when every draft
//! is accepted, a bonus token of p_gamma. The bug (`--bug`: the uniform reused across a row's positions) keeps
//! each row's first draft exact but couples the acceptances of a row. Randomness: xoshiro256** (Blackman &
//! Vigna 2018) seeded by splitmix64 from the call's seed; standard library only.
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};

struct Rng([u64; 4]);

impl Rng {
    fn new(seed: u64) -> Rng {
        let mut s = seed;
        let mut next = || {
            s = s.wrapping_add(0x9E3779B97F4A7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58476D1CE4E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D049BB133111EB);
            z ^ (z >> 31)
        };
        Rng([next(), next(), next(), next()])
    }
    fn next_u64(&mut self) -> u64 {
        let s = &mut self.0;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }
    fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// A token of the unnormalised law `w` by inverse CDF.
fn draw(w: &[f64], u: f64) -> i64 {
    let total: f64 = w.iter().sum();
    let target = u * total;
    let (mut cum, mut last) = (0.0, -1i64);
    for (v, &x) in w.iter().enumerate() {
        if x <= 0.0 {
            continue;
        }
        cum += x;
        last = v as i64;
        if target < cum {
            return v as i64;
        }
    }
    last
}

fn verify(ids: &[i64], q: &[f64], p: &[f64], batch: usize, gamma: usize, vocab: usize, seed: u64, bug: bool)
          -> Result<Vec<i64>, String> {
    let mut rng = Rng::new(seed);
    let mut out = vec![-1i64; batch * (gamma + 1)];
    let mut residual = vec![0.0f64; vocab];
    for b in 0..batch {
        let qb = &q[b * gamma * vocab..(b + 1) * gamma * vocab];
        let pb = &p[b * (gamma + 1) * vocab..(b + 1) * (gamma + 1) * vocab];
        if qb.iter().chain(pb.iter()).any(|x| x.is_nan()) {
            continue; // a row of NaN: -1 everywhere (the contract's choice for a kernel that does not raise)
        }
        let shared = rng.uniform();
        let mut k = 0;
        while k < gamma {
            let x = ids[b * gamma + k];
            if x < 0 || x as usize >= vocab {
                return Err(format!("draft token {} at row {} is not in [0, {})", x, b, vocab));
            }
            let x = x as usize;
            let u = if bug { shared } else { rng.uniform() };
            if u * qb[k * vocab + x] < pb[k * vocab + x] {
                out[b * (gamma + 1) + k] = x as i64;
                k += 1;
                continue;
            }
            for v in 0..vocab {
                residual[v] = (pb[k * vocab + v] - qb[k * vocab + v]).max(0.0);
            }
            out[b * (gamma + 1) + k] = draw(&residual, rng.uniform());
            break;
        }
        if k == gamma {
            out[b * (gamma + 1) + gamma] = draw(&pb[gamma * vocab..], rng.uniform());
        }
    }
    Ok(out)
}

/// The array line of `want`: its dims, or None when it says `same` (the previous call's array, no bytes follow).
fn read_array(input: &mut impl BufRead, want: &str) -> Result<Option<Vec<usize>>, String> {
    let mut line = String::new();
    input.read_line(&mut line).map_err(|e| e.to_string())?;
    let words: Vec<&str> = line.trim_end().split(' ').collect();
    if words.len() == 2 && words[0] == want && words[1] == "same" {
        return Ok(None);
    }
    if words.len() < 3 || words[0] != want {
        return Err(format!("expected the array line of {}, got {:?}", want, line));
    }
    let ndim: usize = words[2].parse().map_err(|_| "bad ndim".to_string())?;
    let dims: Vec<usize> = words[3..3 + ndim].iter().map(|w| w.parse().unwrap_or(0)).collect();
    Ok(Some(dims))
}

fn read_bytes(input: &mut impl Read, count: usize) -> Vec<u8> {
    let mut buf = vec![0u8; count * 8];
    input.read_exact(&mut buf).expect("the checker closed its pipe");
    buf
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let bug = args.iter().any(|a| a == "--bug");
    if !args.iter().any(|a| a == "--serve") {
        eprintln!("usage: {} --serve [--bug]", args[0]);
        std::process::exit(2);
    }
    let mut input = BufReader::new(io::stdin().lock());
    let mut output = BufWriter::new(io::stdout().lock());
    let mut line = String::new();
    input.read_line(&mut line).unwrap();
    if line.trim_end() != "SDC 1 hello verifier" {
        writeln!(output, "SDC 1 error 0 only the verifier kind").unwrap();
        return;
    }
    writeln!(output, "SDC 1 hello {}", if bug { "rust-shared-uniform" } else { "rust-reference" }).unwrap();
    output.flush().unwrap();
    // the previous call's arrays and their dims, for the array lines that say "same"
    let (mut ids, mut q, mut p): (Vec<i64>, Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new(), Vec::new());
    let mut dims: Vec<Vec<usize>> = vec![Vec::new(); 3];
    loop {
        line.clear();
        if input.read_line(&mut line).unwrap_or(0) == 0 || line.trim_end() == "SDC 1 bye" {
            return;
        }
        let words: Vec<&str> = line.trim_end().split(' ').collect();
        if words.len() != 6 || words[2] != "call" {
            eprintln!("not a call: {:?}", line);
            std::process::exit(4);
        }
        let id = words[3].to_string();
        let seed: u64 = words[4].parse().unwrap();
        let names = ["draft_token_ids", "draft_probs", "target_probs"];
        let mut fresh = [false; 3];
        for (a, name) in names.iter().enumerate() {
            match read_array(&mut input, name) {
                Ok(Some(d)) => {
                    dims[a] = d;
                    fresh[a] = true;
                }
                Ok(None) => {}
                Err(message) => {
                    writeln!(output, "SDC 1 error {} {}", id, message).unwrap();
                    output.flush().unwrap();
                    std::process::exit(5);
                }
            }
        }
        let count = |d: &Vec<usize>| d.iter().product::<usize>();
        if fresh[0] {
            ids = read_bytes(&mut input, count(&dims[0])).chunks(8)
                .map(|c| i64::from_le_bytes(c.try_into().unwrap())).collect();
        }
        if fresh[1] {
            q = read_bytes(&mut input, count(&dims[1])).chunks(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect();
        }
        if fresh[2] {
            p = read_bytes(&mut input, count(&dims[2])).chunks(8)
                .map(|c| f64::from_le_bytes(c.try_into().unwrap())).collect();
        }
        let (batch, gamma, vocab) = (dims[0][0], dims[0][1], dims[2][2]);
        match verify(&ids, &q, &p, batch, gamma, vocab, seed, bug) {
            Ok(out) => {
                writeln!(output, "SDC 1 result {} 1\noutput i64 2 {} {}", id, batch, gamma + 1).unwrap();
                for x in out {
                    output.write_all(&x.to_le_bytes()).unwrap();
                }
            }
            Err(message) => writeln!(output, "SDC 1 error {} {}", id, message).unwrap(),
        }
        output.flush().unwrap();
    }
}
