package results

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/png"
)

// writeOpaquePNG encodes an opaque RGBA image as an 8-bit RGB PNG whose rows are not filtered,
// compressed at the fastest level. image/png tries every filter on every row and keeps the best,
// which took most of a report's encoding time; the plots are large areas of flat colour, which
// LZ77 compresses about as well unfiltered (files within a few percent either way, measured on
// the report's plots). An image with any pixel not opaque goes to image/png.
func writeOpaquePNG(img *image.RGBA) ([]byte, error) {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	if w <= 0 || h <= 0 {
		return standardPNG(img)
	}
	var idat bytes.Buffer
	zw, err := zlib.NewWriterLevel(&idat, zlib.BestSpeed)
	if err != nil {
		return nil, err
	}
	row := make([]byte, 1+3*w) // row[0] is the filter type: 0, none
	for y := range h {
		pix := img.Pix[y*img.Stride : y*img.Stride+4*w]
		for x := range w {
			p := pix[4*x : 4*x+4]
			if p[3] != 0xff {
				return standardPNG(img) // found while copying, rather than in a pass of its own
			}
			copy(row[1+3*x:4+3*x], p[:3])
		}
		if _, err := zw.Write(row); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.Grow(idat.Len() + 64)
	out.WriteString("\x89PNG\r\n\x1a\n")
	var ihdr [13]byte
	binary.BigEndian.PutUint32(ihdr[0:], uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(h))
	ihdr[8], ihdr[9] = 8, 2 // 8 bits a sample, truecolour; compression, filter and interlace 0
	writeChunk(&out, "IHDR", ihdr[:])
	writeChunk(&out, "IDAT", idat.Bytes())
	writeChunk(&out, "IEND", nil)
	return out.Bytes(), nil
}

// writeChunk appends a PNG chunk: length, type, data and the CRC of type and data.
func writeChunk(out *bytes.Buffer, typ string, data []byte) {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(data)))
	out.Write(n[:])
	out.WriteString(typ)
	out.Write(data)
	crc := crc32.NewIEEE()
	crc.Write([]byte(typ))
	crc.Write(data)
	binary.BigEndian.PutUint32(n[:], crc.Sum32())
	out.Write(n[:])
}

func standardPNG(img image.Image) ([]byte, error) {
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
