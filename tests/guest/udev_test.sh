#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# packaging/60-msrbatch.rules gives group "msrbatch" the node (0660); the
# module still demands CAP_SYS_RAWIO. The guest has no udev: apply what the
# rule does by hand, check both layers, and put the node back.
. /tests/lib.sh
gid=4242
mode=$(stat -c %a /dev/msrbatch)
owner=$(stat -c %u:%g /dev/msrbatch)
check "node is 0600 root:root by default ($mode $owner)" [ "$mode:$owner" = "600:0:0" ]
chgrp $gid /dev/msrbatch && chmod 0660 /dev/msrbatch
out=$(runas 1000 $gid msrbatch info 2>&1)
echo "# group member without CAP_SYS_RAWIO: $out"
check "a group member without CAP_SYS_RAWIO gets EPERM from the module" sh -c "echo \"\$1\" | grep -q EPERM" _ "$out"
out=$(runas 1001 1001 msrbatch info 2>&1)
echo "# non-member: $out"
check "a non-member gets EACCES from the node's mode" sh -c "echo \"\$1\" | grep -q EACCES" _ "$out"
out=$(runas 1000 $gid --rawio msrbatch info 2>&1)
echo "# group member with ambient CAP_SYS_RAWIO: $(echo "$out" | head -n1)"
check "a group member with CAP_SYS_RAWIO opens it" sh -c "echo \"\$1\" | grep -q 'ABI version'" _ "$out"
chgrp 0 /dev/msrbatch && chmod 0600 /dev/msrbatch
finish
