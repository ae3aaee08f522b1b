#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# packaging/60-msrbatch.rules gives group "msrbatch" /dev/msrbatch (0660) and
# read access to /dev/msrbatch_allowlist (0640). A member without
# CAP_SYS_RAWIO gets a descriptor restricted to the allowlist; with it, full
# access. The guest has no udev: apply what the rule does by hand, check
# both layers, and put the nodes back.
. /tests/lib.sh
gid=4242
for n in msrbatch msrbatch_allowlist; do
	mode=$(stat -c %a /dev/$n)
	owner=$(stat -c %u:%g /dev/$n)
	check "$n is 0600 root:root by default ($mode $owner)" [ "$mode:$owner" = "600:0:0" ]
done
sed -n 's/^\(KERNEL==.*\)/# rule: \1/p' /tests/60-msrbatch.rules
eval "$(sed -n 's/^KERNEL=="\(msrbatch[a-z_]*\)".*MODE="\([0-7]*\)".*/chgrp '$gid' \/dev\/\1 \&\& chmod \2 \/dev\/\1;/p' /tests/60-msrbatch.rules)"
check "the rule's modes applied: 660 and 640" sh -c '[ "$(stat -c %a /dev/msrbatch)$(stat -c %a /dev/msrbatch_allowlist)" = 660640 ]'
msrbatch allowlist load /dev/null >/dev/null
out=$(runas 1000 $gid msrbatch info 2>&1)
echo "# group member without CAP_SYS_RAWIO: $(echo "$out" | head -n1)"
check "a group member without CAP_SYS_RAWIO opens it" sh -c "echo \"\$1\" | grep -q 'ABI version'" _ "$out"
out=$(runas 1000 $gid msrbatch rdmsr 0x277 2>&1)
echo "# ... rdmsr IA32_PAT with the empty allowlist: $out"
check "... restricted: with the empty allowlist, no MSR (EACCES)" sh -c "echo \"\$1\" | grep -q EACCES" _ "$out"
out=$(runas 1001 1001 msrbatch info 2>&1)
echo "# non-member: $out"
check "a non-member gets EACCES from the node's mode" sh -c "echo \"\$1\" | grep -q EACCES" _ "$out"
out=$(runas 1000 $gid --rawio msrbatch rdmsr 0x277 2>&1)
echo "# group member with ambient CAP_SYS_RAWIO, rdmsr IA32_PAT: $out"
check "a group member with CAP_SYS_RAWIO has full access" sh -c "[ \"\$1\" = \"\$(msrbatch rdmsr 0x277)\" ]" _ "$out"
chgrp 0 /dev/msrbatch /dev/msrbatch_allowlist && chmod 0600 /dev/msrbatch /dev/msrbatch_allowlist
finish
