#!/usr/bin/perl
# launch.pl -- rewrite one kernels/cuda/*.cu for the CUDA simulator (make
# check-cudasim; tests/cudasim/README is the overview).  The source is not
# changed; line numbers are kept (every rewrite stays on its lines):
#   name<<<grid, block, smem, stream>>>(args)
#       -> ZT_SIM_LAUNCH("name", name, BOUND, grid, block, smem, stream)(args)
#      BOUND: the kernel's __launch_bounds__ (0 when it declares none)
#   extern __shared__ T x[];   -> T *const x = (T *)zt_sim_dyn_shared("x");
#   __shared__ T x[N];         -> T (&x)[N] = zt_sim_shared_array<T, N>("x", __FILE__, __LINE__);
#      (both live in the block's shared-memory arena, between guard zones:
#      cudasim.cc)
# Usage: launch.pl SRC.cu > OUT.cc
use strict;
use warnings;
my $src = shift or die "usage: launch.pl SRC.cu\n";
open(my $fh, '<', $src) or die "$src: $!\n";
local $/;
my $s = <$fh>;
close $fh;
my %bound;
while ($s =~ /__launch_bounds__\((\w+)\)\s+(\w+)\s*\(/g) { $bound{$2} = $1; }
my $n = 0;
$s =~ s{\b(\w+)(<\w+>)?<<<(.*?)>>>\(}{
    my ($k, $t, $cfg) = ($1, $2 // '', $3);
    $n++;
    "ZT_SIM_LAUNCH(\"$k$t\", $k$t, " . ($bound{$k} // 0) . ", $cfg)("
}gse;
$s =~ s{extern\s+__shared__\s+(\w+)\s+(\w+)\[\];}{$1 *const $2 = ($1 *)zt_sim_dyn_shared("$2");}g;
$s =~ s{(?<!extern )__shared__\s+([\w ]+?)\s+(\w+)\[([^\]]+)\];}
       {$1 (&$2)\[$3\] = zt_sim_shared_array<$1, ($3)>("$2", __FILE__, __LINE__);}g;
die "$src: a __shared__ declaration was not rewritten\n" if $s =~ /__shared__/;
die "$src: a <<< launch was not rewritten\n" if $s =~ /<<</;
(my $name = $src) =~ s{.*/(kernels/cuda/)}{$1};
print "#line 1 \"$name\"\n", $s;
