//! Where a region's registers come from and where they go ([`Layout`]),
//! for splitting it into functions of [`CHUNK`] instructions.

use crate::compile::scalar::code::SInstr;

/// Instructions per generated function. Cranelift's compile time grows
/// faster than linearly with a function's size (one function of 70 000
/// instructions took minutes; in functions of 2 048, 512 and 256
/// instructions it took 2.4 s, 1.1 s and 1.1 s, loaded), so a longer
/// region is split into functions of at most this many instructions,
/// called one after the other; a value used after the function defining it
/// passes through a spill buffer (one slot per register), stored where it
/// is made.
pub(super) const CHUNK: usize = 512;

/// Where the registers of a region come from and where they go, for
/// splitting it into functions.
pub(super) struct Layout {
    /// The input slot of each register loaded from `ins`.
    pub(super) load_of: Vec<Option<u32>>,
    /// The value of each constant register.
    pub(super) const_of: Vec<Option<f64>>,
    /// Whether a register defined in one function is used in a later one.
    pub(super) spilled: Vec<bool>,
}

impl Layout {
    /// The layout of `code` (operands resolved: no `ACC`) over `len`
    /// registers, split into functions of [`CHUNK`] instructions.
    pub(super) fn new(code: &[SInstr], len: usize, consts: &[(u32, f64)]) -> Layout {
        let mut load_of = vec![None; len];
        let mut const_of = vec![None; len];
        for &(r, v) in consts {
            const_of[r as usize] = Some(v);
        }
        let mut def = vec![usize::MAX; len];
        let mut spilled = vec![false; len];
        let mut loads = 0;
        for (i, ins) in code.iter().enumerate() {
            let c = i / CHUNK;
            if let SInstr::Load { dst, .. } = ins {
                load_of[*dst as usize] = Some(loads);
                loads += 1;
                continue;
            }
            let dst = ins.clone().visit_operands(|r| {
                let r = *r as usize;
                if def[r] != usize::MAX && def[r] < c {
                    spilled[r] = true;
                }
            });
            if let Some(d) = dst {
                def[d as usize] = c;
            }
        }
        Layout {
            load_of,
            const_of,
            spilled,
        }
    }
}
