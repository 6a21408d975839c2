package results

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"testing"
)

// What writeOpaquePNG writes decodes, with image/png, to the very pixels it was given: opaque images
// of odd sizes with flat areas and noise; an image with a translucent pixel goes to image/png.
func TestWriteOpaquePNGDecodesToTheSamePixels(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for _, size := range [][2]int{{1, 1}, {3, 7}, {64, 1}, {257, 33}, {1126, 40}} {
		for _, translucent := range []bool{false, true} {
			img := image.NewRGBA(image.Rect(0, 0, size[0], size[1]))
			for i := range img.Pix {
				img.Pix[i] = 255
			}
			for range size[0] * size[1] / 3 {
				x, y := rng.IntN(size[0]), rng.IntN(size[1])
				img.SetRGBA(x, y, color.RGBA{uint8(rng.IntN(256)), uint8(rng.IntN(256)), uint8(rng.IntN(256)), 255})
			}
			if translucent {
				img.SetRGBA(size[0]/2, size[1]/2, color.RGBA{10, 20, 30, 128})
			}
			b, err := writeOpaquePNG(img)
			if err != nil {
				t.Fatal(err)
			}
			if translucent {
				// Premultiplied alpha does not survive PNG exactly: it must be image/png's own file.
				want, err := standardPNG(img)
				if err != nil || !bytes.Equal(b, want) {
					t.Fatalf("%v: a translucent image was not handed to image/png (%v)", size, err)
				}
				continue
			}
			got, err := png.Decode(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("%v translucent=%v: %v", size, translucent, err)
			}
			if got.Bounds() != img.Bounds() {
				t.Fatalf("%v: decoded bounds %v", size, got.Bounds())
			}
			for y := range size[1] {
				for x := range size[0] {
					r1, g1, b1, a1 := got.At(x, y).RGBA()
					r2, g2, b2, a2 := img.At(x, y).RGBA()
					if r1 != r2 || g1 != g2 || b1 != b2 || a1 != a2 {
						t.Fatalf("%v translucent=%v: pixel (%d,%d) decodes to %v, was %v", size, translucent, x, y, got.At(x, y), img.At(x, y))
					}
				}
			}
		}
	}
}
