// Package vmtest runs commands inside a throw-away amd64 Debian VM with a
// real Linux kernel, so code that talks to GPIO character devices and
// /dev/i2c-N can be tested against the kernel's own gpio-sim and i2c-stub
// drivers instead of mocks.
//
// # Image
//
// [Cache.Image] builds, once per recipe, a Debian trixie minbase root file
// system with systemd, libgpiod v2 tools and i2c-tools, plus the kernel from
// trixie-backports (the first Debian kernel series with CONFIG_GPIO_SIM=m;
// bookworm's has none). The result lives in CACHE/image-HASH/ (vmlinuz,
// initrd.img, disk.raw, manifest.json), HASH covering the recipe and every
// guest-side file. The kernel version is whatever trixie-backports has at
// build time and is recorded in manifest.json; --rebuild picks up a newer one.
// The debootstrap stage is also kept as CACHE/rootfs-HASH.tar.zst so changing
// only the guest scripts rebuilds in seconds, not minutes.
//
// # Running a command
//
// [Cache.Run] boots the image through a qcow2 overlay (the base image is never
// written), waits for systemd to finish booting and runs the command as root.
// The command travels on a read-only 9p share tagged "vmtest" (file argv,
// NUL-terminated arguments) that the guest's vmtest.service mounts at
// /run/vmtest. Its stdout and stderr come back byte for byte on two
// virtio-serial ports (vmtest.stdout, vmtest.stderr) and its exit status on a
// third (vmtest.status), so nothing from the kernel or systemd, which go to
// the serial console log, mixes in. The host copies them to its own
// stdout/stderr as they arrive, then powers the guest off (QMP
// system_powerdown; killed if it lingers) and reports the exit status.
//
// With a shared host directory it is mounted read-only at /share in the
// guest and the command starts there; otherwise it starts in /root.
//
// # Devices in the guest
//
// Before the command runs, vmtest-devices.service has run:
//
//   - /usr/local/sbin/vm-gpio-sim: gpio-sim chip labelled pinctrl-bcm2711,
//     one bank of 28 lines named GPIO0..GPIO27. $GPIO_SIM_CHIP is its
//     /dev/gpiochipN and $GPIO_SIM_SYSFS its sysfs directory,
//     /sys/devices/platform/gpio-sim.0/gpiochipN: sim_gpioL/value shows what
//     a consumer drives on line L, and writing pull-up or pull-down to
//     sim_gpioL/pull sets what an input on line L reads. Calling the script
//     again re-creates the bank from scratch.
//   - /usr/local/sbin/vm-i2c-stub: i2c-dev and i2c-stub chip_addr=0x48,0x76
//     (loaded early by systemd-modules-load). $I2C_STUB_BUS is the stub's bus
//     number: the adapter `i2cdetect -l` lists as "SMBus stub driver",
//     usually i2c-0, with qemu's PIIX4 SMBus as i2c-1; do not hard-code it.
//
// Both write their variables to /run/vm-devices/*.env, and the command gets
// them in its environment.
//
// # Acceleration
//
// KVM is used when a short probe boot (the initramfs prints a marker and
// powers off) succeeds within 25 s; the verdict is cached per machine in
// CACHE/kvm-probe.json. Nested hypervisors are known to kill guests in the
// kernel decompressor with "KVM internal error" and leave qemu hanging, hence
// the time limit. Otherwise TCG (-accel tcg,thread=multi -cpu max) with
// tsc=reliable on the kernel command line: without it, about one boot in
// eight oopsed on a stale int3 when the clocksource watchdog made the kernel
// live-patch itself while the other vCPU ran (qemu 7.2's multi-threaded TCG).
// A kernel crash before the command started is retried once.
//
// # Network
//
// None by default. Port forwards use qemu's user network with restrict=on
// and host side bound to 127.0.0.1, so the guest can reach nothing and only
// local processes can reach the guest; the guest gets 10.0.2.15/24 and runs
// sshd (no keys or passwords are set up; the command can add
// /root/.ssh/authorized_keys).
package vmtest
