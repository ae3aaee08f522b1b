// SPDX-License-Identifier: GPL-2.0

//! A heapsort, `core` only, no allocation, no panic: the module's sort
//! (`compat::sort_by_key`). Compiled as a submodule of `allowlist_text.rs`,
//! whose allowlist sort uses it too and which the library shares, so the
//! library's host tests test it.
//!
//! core's slice sorts call `panic_on_ord_violation()`, which 7.3.4's objtool
//! does not know never returns: built by Debian's rustc 1.85 they made it warn
//! "falls through to next function".

/// Sorts `v` by `key`, in place, not stable; O(n log n).
pub(crate) fn sort_by_key<T, K: Ord>(v: &mut [T], key: impl Fn(&T) -> K) {
    let n = v.len();
    // A max-heap, then the largest moved to the end, n - 1 times.
    for root in (0..n / 2).rev() {
        sift_down(v, root, n, &key);
    }
    for end in (1..n).rev() {
        v.swap(0, end);
        sift_down(v, 0, end, &key);
    }
}

/// Moves `v[root]` down the heap `v[..end]` until both its children are
/// smaller.
fn sift_down<T, K: Ord>(v: &mut [T], mut root: usize, end: usize, key: &impl Fn(&T) -> K) {
    // `root < end <= v.len() <= isize::MAX`: `2 * root + 2` cannot overflow.
    loop {
        let mut child = 2 * root + 1;
        if child >= end {
            return;
        }
        if child + 1 < end && key(&v[child]) < key(&v[child + 1]) {
            child += 1;
        }
        if key(&v[root]) >= key(&v[child]) {
            return;
        }
        v.swap(root, child);
        root = child;
    }
}

#[cfg(test)]
mod tests {
    use super::sort_by_key;

    #[test]
    fn sorts_like_std() {
        // Every array of length 0..=6 over the values 0..3 (duplicates too),
        // then longer ones from a fixed LCG.
        for len in 0..=6u32 {
            for code in 0..4u32.pow(len) {
                let mut v: Vec<u32> = (0..len).map(|i| (code / 4u32.pow(i)) % 4).collect();
                let mut want = v.clone();
                want.sort_unstable();
                sort_by_key(&mut v, |&x| x);
                assert_eq!(v, want);
            }
        }
        let mut x = 12345u64;
        for len in [7usize, 100, 1000, 4097] {
            let mut v: Vec<(u32, u32)> = (0..len)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((x >> 40) as u32 % 50, (x >> 20) as u32 % 7)
                })
                .collect();
            let mut want = v.clone();
            want.sort_unstable_by_key(|&(a, b)| (b, a));
            sort_by_key(&mut v, |&(a, b)| (b, a));
            assert_eq!(v, want);
        }
    }
}
