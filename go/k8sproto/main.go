// Command k8sproto transcodes Kubernetes protobuf bodies ("k8s\x00" + runtime.Unknown)
// to JSON and back with the real codecs of k8s.io/apimachinery, over the types that
// client-go's scheme registers (core, coordination, policy, scheduling, storage,
// events, ... and the meta options such as DeleteOptions in every group).
//
// It is a long-lived filter: the API front (kube_api/protobuf.py) writes requests on
// stdin and reads answers on stdout, one at a time, in frames
//
//	request:  op (1 byte) | length (uint32, big endian) | payload
//	answer:   status (1 byte) | length (uint32, big endian) | payload
//
// op 'D' decodes a protobuf body to the object's JSON (apiVersion and kind set);
// op 'E' encodes a JSON object (apiVersion and kind set) to a protobuf body, which the
// tests use to produce real wire bytes. status 'O' carries the result, 'E' an error
// message naming what is wrong. The process exits when stdin closes.
package main

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes/scheme"
)

// protobufMagic starts every Kubernetes protobuf body (k8s.io/apimachinery
// runtime/serializer/protobuf).
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// maxFrame bounds one body; the API server's own request limit is 3 MiB.
const maxFrame = 64 << 20

var (
	protoSerializer = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	jsonDecoder     = scheme.Codecs.UniversalDeserializer()
)

func decode(body []byte) (out []byte, err error) {
	// The generated unmarshallers check bounds, but a panic on hostile input must not
	// take the front's decoder down with it.
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("protobuf body: the decoder failed on it: %v", r)
		}
	}()
	if len(body) < len(protobufMagic) || string(body[:4]) != string(protobufMagic) {
		n := len(body)
		if n > 8 {
			n = 8
		}
		return nil, fmt.Errorf("not a Kubernetes protobuf body: it must start with the bytes 6b 38 73 00 (\"k8s\\x00\"), got % x", body[:n])
	}
	obj, gvk, err := protoSerializer.Decode(body, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("protobuf body: %v", err)
	}
	if _, isUnknown := obj.(*runtime.Unknown); isUnknown {
		return nil, fmt.Errorf("protobuf body: kind %q of %q is not a registered type", gvk.Kind, gvk.GroupVersion().String())
	}
	obj.GetObjectKind().SetGroupVersionKind(*gvk)
	out, err = json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("%s %s: JSON encoding: %v", gvk.GroupVersion().String(), gvk.Kind, err)
	}
	return out, nil
}

func encode(body []byte) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("JSON object: the encoder failed on it: %v", r)
		}
	}()
	obj, gvk, err := jsonDecoder.Decode(body, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("JSON object: %v", err)
	}
	obj.GetObjectKind().SetGroupVersionKind(*gvk)
	var buf writeBuffer
	if err := protoSerializer.Encode(obj, &buf); err != nil {
		return nil, fmt.Errorf("%s %s: protobuf encoding: %v", gvk.GroupVersion().String(), gvk.Kind, err)
	}
	return buf.b, nil
}

type writeBuffer struct{ b []byte }

func (w *writeBuffer) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }

func writeFrame(w *bufio.Writer, status byte, payload []byte) error {
	var head [5]byte
	head[0] = status
	binary.BigEndian.PutUint32(head[1:], uint32(len(payload)))
	if _, err := w.Write(head[:]); err != nil {
		return err
	}
	if _, err := w.Write(payload); err != nil {
		return err
	}
	return w.Flush()
}

func serve(in io.Reader, out io.Writer) error {
	r := bufio.NewReaderSize(in, 1<<16)
	w := bufio.NewWriterSize(out, 1<<16)
	var head [5]byte
	for {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading a frame header: %v", err)
		}
		op, n := head[0], binary.BigEndian.Uint32(head[1:])
		if n > maxFrame {
			return fmt.Errorf("frame of %d bytes is larger than %d", n, maxFrame)
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(r, payload); err != nil {
			return fmt.Errorf("reading a frame of %d bytes: %v", n, err)
		}
		var result []byte
		var err error
		switch op {
		case 'D':
			result, err = decode(payload)
		case 'E':
			result, err = encode(payload)
		default:
			err = fmt.Errorf("unknown op %q (want 'D' or 'E')", op)
		}
		if err != nil {
			err = writeFrame(w, 'E', []byte(err.Error()))
		} else {
			err = writeFrame(w, 'O', result)
		}
		if err != nil {
			return fmt.Errorf("writing an answer: %v", err)
		}
	}
}

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: k8sproto  (frames on stdin, answers on stdout; see the package doc)")
		os.Exit(2)
	}
	if err := serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "k8sproto:", err)
		os.Exit(1)
	}
}
