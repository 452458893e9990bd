//! Raw Linux system calls for the guard, without libc (which would touch errno, shared with
//! distlock's main thread): x86_64 and aarch64.

/// A system call with up to five arguments, without libc (no errno): the result, or minus the
/// error number.
///
/// # Safety
/// The arguments must be valid for system call `number`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) unsafe fn syscall(number: libc::c_long, args: [usize; 5]) -> isize {
    let ret: isize;
    // SAFETY: the Linux x86_64 system call convention (arguments in rdi, rsi, rdx, r10, r8);
    // rcx and r11 are clobbered.
    unsafe {
        std::arch::asm!(
            "syscall",
            inlateout("rax") number as isize => ret,
            in("rdi") args[0],
            in("rsi") args[1],
            in("rdx") args[2],
            in("r10") args[3],
            in("r8") args[4],
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret
}

/// A system call with up to five arguments, without libc (no errno): the result, or minus the
/// error number.
///
/// # Safety
/// The arguments must be valid for system call `number`.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
pub(super) unsafe fn syscall(number: libc::c_long, args: [usize; 5]) -> isize {
    let ret: isize;
    // SAFETY: the Linux aarch64 system call convention (number in x8, arguments in x0-x4,
    // result in x0).
    unsafe {
        std::arch::asm!(
            "svc 0",
            in("x8") number,
            inlateout("x0") args[0] as isize => ret,
            in("x1") args[1],
            in("x2") args[2],
            in("x3") args[3],
            in("x4") args[4],
            options(nostack),
        );
    }
    ret
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("distlock's guard makes raw system calls for x86_64 and aarch64 Linux only");
