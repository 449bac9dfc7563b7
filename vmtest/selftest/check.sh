#!/bin/bash
# vmtest self-test, run inside the guest from the shared directory: checks
# the kernel devices and userland the raspi-mcp VM tests rely on.
set -u
pass=0
fail=0

ok() {
	echo "ok   - $*"
	pass=$((pass + 1))
}
bad() {
	echo "FAIL - $*"
	fail=$((fail + 1))
}
check() {
	local what=$1
	shift
	if "$@"; then ok "$what"; else bad "$what"; fi
}

echo "# kernel $(uname -r), chip ${GPIO_SIM_CHIP:-?} at ${GPIO_SIM_SYSFS:-?}, i2c-stub bus ${I2C_STUB_BUS:-?}"

# systemd is PID 1 and finished booting.
check "systemd is PID 1" [ "$(cat /proc/1/comm)" = systemd ]
state=$(systemctl is-system-running)
case "$state" in
running | degraded) ok "system is $state" ;;
*) bad "system is '$state', want running or degraded" ;;
esac
[ "$state" = degraded ] && systemctl --failed --no-legend --plain | sed 's/^/#   failed: /'

# gpio-sim: chip, names, output, input.
chip=${GPIO_SIM_CHIP#/dev/}
sysfs=${GPIO_SIM_SYSFS:-}
detect=$(gpiodetect)
echo "$detect" | sed 's/^/#   /'
check "gpiodetect lists $chip as pinctrl-bcm2711 with 28 lines" \
	grep -q "^$chip \[pinctrl-bcm2711\] (28 lines)" <<<"$detect"
info=$(gpioinfo -c "$chip")
check "gpioinfo shows line 17 named GPIO17" grep -Eq '^[[:space:]]*line[[:space:]]+17:[[:space:]]+"GPIO17"' <<<"$info"
check "gpioinfo finds GPIO17 by name" grep -q '"GPIO17"' <<<"$(gpioinfo GPIO17)"

check "sim_gpio17/value starts at 0" [ "$(cat "$sysfs/sim_gpio17/value")" = 0 ]
gpioset -c "$chip" GPIO17=1 &
setter=$!
v=0
for _ in $(seq 50); do
	v=$(cat "$sysfs/sim_gpio17/value")
	[ "$v" = 1 ] && break
	sleep 0.1
done
check "gpioset GPIO17=1 drives sim_gpio17/value to 1" [ "$v" = 1 ]
check "gpioinfo shows GPIO17 as a used output" grep -Eq '"GPIO17".*output.*consumer="gpioset"' <<<"$(gpioinfo -c "$chip" 17)"
kill "$setter"
wait "$setter" 2>/dev/null

echo pull-down >"$sysfs/sim_gpio4/pull"
check "GPIO4 reads 0 with pull-down" [ "$(gpioget --numeric -c "$chip" GPIO4)" = 0 ]
echo pull-up >"$sysfs/sim_gpio4/pull"
check "GPIO4 reads 1 with pull-up" [ "$(gpioget --numeric -c "$chip" GPIO4)" = 1 ]

# i2c-stub: bus, chips, register round trip.
bus=${I2C_STUB_BUS:-}
list=$(i2cdetect -l)
echo "$list" | sed 's/^/#   /'
check "i2cdetect -l lists i2c-$bus as the SMBus stub" grep -Eq "^i2c-$bus[[:space:]].*SMBus stub driver" <<<"$list"
scan=$(i2cdetect -y "$bus")
echo "$scan" | sed 's/^/#   /'
check "i2cdetect -y $bus shows 0x48" grep -Eq '^40:.* 48( |$)' <<<"$scan"
check "i2cdetect -y $bus shows 0x76" grep -Eq '^70:.* 76( |$)' <<<"$scan"
i2cset -y "$bus" 0x48 0x10 0xa5
check "i2cset/i2cget round-trip 0xa5 in register 0x10 of 0x48" [ "$(i2cget -y "$bus" 0x48 0x10)" = 0xa5 ]
i2cset -y "$bus" 0x76 0xd0 0x60
check "i2cset/i2cget round-trip 0x60 in register 0xd0 of 0x76" [ "$(i2cget -y "$bus" 0x76 0xd0)" = 0x60 ]

# The helper re-creates a clean bank.
if out=$(vm-gpio-sim); then
	ok "vm-gpio-sim re-creates the bank"
	eval "$out"
else
	bad "vm-gpio-sim re-creates the bank"
fi
check "re-created bank has GPIO27" grep -q '"GPIO27"' <<<"$(gpioinfo -c "${GPIO_SIM_CHIP#/dev/}" 27)"
check "re-created bank has sim_gpio27" [ -e "$GPIO_SIM_SYSFS/sim_gpio27/value" ]

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
