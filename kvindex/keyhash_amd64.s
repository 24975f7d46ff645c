//go:build amd64 && !purego

#include "textflag.h"

// XXH3-64 (seed 0, default secret) of 256-byte blocks with AVX2, and the
// key chain over them. See keyhash_amd64.go for what is computed and why.

// XXH3's default secret (kSecret, 192 bytes) as little-endian words.
DATA secret<>+0(SB)/8, $0xbe4ba423396cfeb8
DATA secret<>+8(SB)/8, $0x1cad21f72c81017c
DATA secret<>+16(SB)/8, $0xdb979083e96dd4de
DATA secret<>+24(SB)/8, $0x1f67b3b7a4a44072
DATA secret<>+32(SB)/8, $0x78e5c0cc4ee679cb
DATA secret<>+40(SB)/8, $0x2172ffcc7dd05a82
DATA secret<>+48(SB)/8, $0x8e2443f7744608b8
DATA secret<>+56(SB)/8, $0x4c263a81e69035e0
DATA secret<>+64(SB)/8, $0xcb00c391bb52283c
DATA secret<>+72(SB)/8, $0xa32e531b8b65d088
DATA secret<>+80(SB)/8, $0x4ef90da297486471
DATA secret<>+88(SB)/8, $0xd8acdea946ef1938
DATA secret<>+96(SB)/8, $0x3f349ce33f76faa8
DATA secret<>+104(SB)/8, $0x1d4f0bc7c7bbdcf9
DATA secret<>+112(SB)/8, $0x3159b4cd4be0518a
DATA secret<>+120(SB)/8, $0x647378d9c97e9fc8
DATA secret<>+128(SB)/8, $0xc3ebd33483acc5ea
DATA secret<>+136(SB)/8, $0xeb6313faffa081c5
DATA secret<>+144(SB)/8, $0x49daf0b751dd0d17
DATA secret<>+152(SB)/8, $0x9e68d429265516d3
DATA secret<>+160(SB)/8, $0xfca1477d58be162b
DATA secret<>+168(SB)/8, $0xce31d07ad1b8f88f
DATA secret<>+176(SB)/8, $0x280416958f3acb45
DATA secret<>+184(SB)/8, $0x7e404bbbcafbd7af
GLOBL secret<>(SB), RODATA|NOPTR, $192

// XXH3's initial accumulators: PRIME32_3, PRIME64_1, PRIME64_2, PRIME64_3,
// PRIME64_4, PRIME32_2, PRIME64_5, PRIME32_1.
DATA accinit<>+0(SB)/8, $0x00000000c2b2ae3d
DATA accinit<>+8(SB)/8, $0x9e3779b185ebca87
DATA accinit<>+16(SB)/8, $0xc2b2ae3d27d4eb4f
DATA accinit<>+24(SB)/8, $0x165667b19e3779f9
DATA accinit<>+32(SB)/8, $0x85ebca77c2b2ae63
DATA accinit<>+40(SB)/8, $0x0000000085ebca77
DATA accinit<>+48(SB)/8, $0x27d4eb2f165667c5
DATA accinit<>+56(SB)/8, $0x000000009e3779b1
GLOBL accinit<>(SB), RODATA|NOPTR, $64

// STRIPE accumulates the 64 bytes at doff(SI) into Y1 (accumulators 0–3)
// and Y2 (4–7) with the secret at byte offset koff: for each 64-bit lane
// i, acc[i] += lo32(d^k) × hi32(d^k) and acc[i^1] += d.
#define STRIPE(doff, koff) \
	VMOVDQU  doff(SI), Y3; \
	VMOVDQU  doff+32(SI), Y4; \
	VPXOR    secret<>+koff(SB), Y3, Y5; \
	VPXOR    secret<>+koff+32(SB), Y4, Y6; \
	VPSHUFD  $0x31, Y5, Y7; \
	VPSHUFD  $0x31, Y6, Y8; \
	VPMULUDQ Y5, Y7, Y5; \
	VPMULUDQ Y6, Y8, Y6; \
	VPSHUFD  $0x4e, Y3, Y3; \
	VPSHUFD  $0x4e, Y4, Y4; \
	VPADDQ   Y5, Y1, Y1; \
	VPADDQ   Y6, Y2, Y2; \
	VPADDQ   Y3, Y1, Y1; \
	VPADDQ   Y4, Y2, Y2

// FOLD adds to R8 the 128-bit product of the two 64-bit lanes of Xn,
// folded to 64 bits (high XOR low). Clobbers AX, DX, R9.
#define FOLD(Xn) \
	VMOVQ   Xn, AX; \
	VPEXTRQ $1, Xn, R9; \
	MULQ    R9; \
	XORQ    DX, AX; \
	ADDQ    AX, R8

// BLOCK leaves in R8 the XXH3-64 of the 256 bytes at (SI), with the
// initial accumulators in Y9, Y10 and the avalanche multiplier in R11:
// three stripes at secret offsets 0, 8 and 16, the last stripe (bytes
// 192–255) at offset 121, then the merge at offset 11 from 256 × PRIME64_1
// and XXH3's avalanche.
#define BLOCK \
	VMOVDQA      Y9, Y1; \
	VMOVDQA      Y10, Y2; \
	STRIPE(0, 0); \
	STRIPE(64, 8); \
	STRIPE(128, 16); \
	STRIPE(192, 121); \
	VPXOR        secret<>+11(SB), Y1, Y1; \
	VPXOR        secret<>+43(SB), Y2, Y2; \
	MOVQ         $0x3779b185ebca8700, R8; \
	FOLD(X1); \
	VEXTRACTI128 $1, Y1, X3; \
	FOLD(X3); \
	FOLD(X2); \
	VEXTRACTI128 $1, Y2, X4; \
	FOLD(X4); \
	MOVQ         R8, R9; \
	SHRQ         $37, R9; \
	XORQ         R9, R8; \
	IMULQ        R11, R8; \
	MOVQ         R8, R9; \
	SHRQ         $32, R9; \
	XORQ         R9, R8

// func hashBlock64AVX2(tokens *[64]uint32) uint64
TEXT ·hashBlock64AVX2(SB), NOSPLIT, $0-16
	MOVQ    tokens+0(FP), SI
	VMOVDQU accinit<>+0(SB), Y9
	VMOVDQU accinit<>+32(SB), Y10
	MOVQ    $0x165667919e3779f9, R11
	BLOCK
	VZEROUPPER
	MOVQ    R8, ret+8(FP)
	RET

// func keys64AVX2(dst *Key, tokens *uint32, n int, parent Key)
//
// For each of the n blocks of 64 tokens at tokens: dst[i] = Chain(parent,
// XXH3-64(block i)), parent = dst[i]. Each block's hash is independent of
// the chain, so the CPU runs the next blocks' hashing while the chain's
// multiplies are in flight.
TEXT ·keys64AVX2(SB), NOSPLIT, $0-32
	MOVQ    dst+0(FP), DI
	MOVQ    tokens+8(FP), SI
	MOVQ    n+16(FP), CX
	MOVQ    parent+24(FP), BX
	TESTQ   CX, CX
	JZ      done
	VMOVDQU accinit<>+0(SB), Y9
	VMOVDQU accinit<>+32(SB), Y10
	MOVQ    $0x165667919e3779f9, R11
	MOVQ    $0x9e3779b97f4a7c15, R12
	MOVQ    $0xbf58476d1ce4e5b9, R13
	MOVQ    $0x94d049bb133111eb, R10

loop:
	BLOCK

	// Chain(parent, block): x = parent ^ block×0x9E3779B97F4A7C15, then
	// SplitMix64's finaliser.
	IMULQ R12, R8
	XORQ  BX, R8
	MOVQ  R8, R9
	SHRQ  $30, R9
	XORQ  R9, R8
	IMULQ R13, R8
	MOVQ  R8, R9
	SHRQ  $27, R9
	XORQ  R9, R8
	IMULQ R10, R8
	MOVQ  R8, R9
	SHRQ  $31, R9
	XORQ  R9, R8
	MOVQ  R8, (DI)
	MOVQ  R8, BX
	ADDQ  $8, DI
	ADDQ  $256, SI
	DECQ  CX
	JNZ   loop
	VZEROUPPER

done:
	RET
